// Checks a llama.cpp rpc-server over the wire before the engine registers it: ggml's own client aborts the whole process
// when a server is unreachable or speaks another protocol version (ggml-rpc.cpp, rpc_dispatcher::start), so Ponder asks
// first, in TypeScript, with a timeout. The messages are ggml-rpc.cpp's (protocol 7): a request is the command (1 byte),
// the payload size (u64, little-endian) and the payload; a response is the size (u64) and the payload.
import net from "node:net";
import {parseRpcEndpoint, type RpcEndpoint} from "./rpcEndpoint.js";

export type RpcProtocol = {major: number; minor: number; patch: number};

export type RpcRemoteDevice = {index: number; freeBytes: number; totalBytes: number};

export type RpcProbe =
    | {endpoint: string; ok: true; protocol: RpcProtocol; devices: RpcRemoteDevice[]; ms: number}
    | {endpoint: string; ok: false; protocol: RpcProtocol | null; error: string};

export type RpcProbeOptions = {
    /** The protocol the engine build speaks (`ponderRpcProtocol`); a server of another major, or a newer minor, is refused. */
    expected?: RpcProtocol | null;
    /** Milliseconds for the whole exchange. Defaults to 3000. */
    timeoutMs?: number;
};

const cmdGetDeviceMemory = 11;
const cmdHello = 14;
const cmdDeviceCount = 15;
/** RPC_CONN_CAPS_SIZE: the transport capabilities both sides send in HELLO (all zero: plain TCP). */
const connCapsSize = 24;
/** rpc-server takes devices one per index; more than this is not a server Ponder should trust. */
const maxDevices = 64;

/**
 * Connects to the rpc-server at `endpoint` ("host:port"), says HELLO, and asks for its devices and their memory; never
 * throws. An rpc-server serves one client at a time, so one busy with another client (this app's engine included)
 * does not answer within the timeout: the error says so.
 */
export async function probeRpcServer(endpoint: string, options: RpcProbeOptions = {}): Promise<RpcProbe> {
    let parsed: RpcEndpoint;
    try {
        parsed = parseRpcEndpoint(endpoint);
    } catch (err) {
        return {endpoint, ok: false, protocol: null, error: (err as Error).message};
    }
    const name = parsed.endpoint;
    const started = performance.now();
    const connection = new RpcConnection(parsed, options.timeoutMs ?? 3000);
    let answered: RpcProtocol | null = null;
    try {
        await connection.open();
        const hello = await connection.request(cmdHello, Buffer.alloc(connCapsSize), 4 + connCapsSize);
        const protocol: RpcProtocol = {major: hello.readUInt8(0), minor: hello.readUInt8(1), patch: hello.readUInt8(2)};
        answered = protocol;
        const expected = options.expected;
        if (expected != null && (protocol.major !== expected.major || protocol.minor > expected.minor))
            return {
                endpoint: name,
                ok: false,
                protocol,
                error:
                    `it speaks RPC protocol ${formatProtocol(protocol)}, this engine ${formatProtocol(expected)}: ` +
                    "run the rpc-server of the same Ponder version (npm run rpc-server)"
            };
        const count = (await connection.request(cmdDeviceCount, Buffer.alloc(0), 4)).readUInt32LE(0);
        if (count === 0 || count > maxDevices)
            return {endpoint: name, ok: false, protocol, error: count === 0 ? "it has no devices" : `it reports ${count} devices`};
        const devices: RpcRemoteDevice[] = [];
        for (let index = 0; index < count; index++) {
            const request = Buffer.alloc(4);
            request.writeUInt32LE(index, 0);
            const memory = await connection.request(cmdGetDeviceMemory, request, 16);
            devices.push({index, freeBytes: Number(memory.readBigUInt64LE(0)), totalBytes: Number(memory.readBigUInt64LE(8))});
        }
        return {endpoint: name, ok: true, protocol, devices, ms: performance.now() - started};
    } catch (err) {
        return {endpoint: name, ok: false, protocol: answered, error: (err as Error).message};
    } finally {
        connection.close();
    }
}

export function formatProtocol(protocol: RpcProtocol): string {
    return `${protocol.major}.${protocol.minor}.${protocol.patch}`;
}

/** One TCP connection that reads whole responses, with one deadline for everything. */
class RpcConnection {
    private readonly _socket = new net.Socket();
    private _buffer = Buffer.alloc(0);
    private _waiter: (() => void) | null = null;
    private _failure: Error | null = null;
    private readonly _timer: NodeJS.Timeout;

    constructor(
        private readonly _endpoint: RpcEndpoint,
        timeoutMs: number
    ) {
        this._socket.setNoDelay(true);
        this._socket.on("data", (chunk) => {
            this._buffer = Buffer.concat([this._buffer, chunk]);
            this._wake();
        });
        this._socket.on("error", (err: NodeJS.ErrnoException) => this._fail(new Error(describeSocketError(err))));
        this._socket.on("close", () =>
            this._fail(new Error("it closed the connection (is it an rpc-server of another version, or busy?)"))
        );
        this._timer = setTimeout(
            () =>
                this._fail(
                    new Error(
                        `no answer within ${(timeoutMs / 1000).toFixed(1)} s (an rpc-server serves one client at a time: it may be busy with another, or not an rpc-server)`
                    )
                ),
            timeoutMs
        );
    }

    open(): Promise<void> {
        return new Promise((resolve, reject) => {
            this._socket.once("connect", () => resolve());
            this._waiter = () => {
                if (this._failure != null) reject(this._failure);
            };
            this._socket.connect(this._endpoint.port, this._endpoint.host);
        });
    }

    /** Sends a command and reads its response, which must be exactly `size` bytes. */
    async request(cmd: number, payload: Buffer, size: number): Promise<Buffer> {
        const header = Buffer.alloc(9);
        header.writeUInt8(cmd, 0);
        header.writeBigUInt64LE(BigInt(payload.length), 1);
        this._socket.write(Buffer.concat([header, payload]));
        const sizeBytes = await this._read(8);
        const got = sizeBytes.readBigUInt64LE(0);
        if (got !== BigInt(size))
            throw new Error(`it answered with ${got} bytes where an rpc-server answers ${size}: not an rpc-server of this protocol`);
        return this._read(size);
    }

    close(): void {
        clearTimeout(this._timer);
        this._socket.destroy();
    }

    private async _read(size: number): Promise<Buffer> {
        while (this._buffer.length < size) {
            if (this._failure != null) throw this._failure;
            await new Promise<void>((resolve) => (this._waiter = resolve));
        }
        const out = this._buffer.subarray(0, size);
        this._buffer = this._buffer.subarray(size);
        return out;
    }

    private _fail(err: Error): void {
        this._failure ??= err;
        this._wake();
    }

    private _wake(): void {
        const waiter = this._waiter;
        this._waiter = null;
        waiter?.();
    }
}

function describeSocketError(err: NodeJS.ErrnoException): string {
    switch (err.code) {
        case "ECONNREFUSED":
            return "connection refused (no rpc-server listens there)";
        case "ENOTFOUND":
        case "EAI_AGAIN":
            return "the host name does not resolve";
        case "EHOSTUNREACH":
        case "ENETUNREACH":
            return "the host cannot be reached";
        case "ECONNRESET":
            return "the connection was reset";
        default:
            return err.message;
    }
}
