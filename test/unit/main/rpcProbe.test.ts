// The rpc-server check Ponder runs before ggml's client (which aborts the process on a failure) connects: ggml-rpc's
// wire messages against a server played here, one that speaks another protocol, one that is not an rpc-server, one
// that never answers, and none at all.
import net from "node:net";
import {afterEach, describe, expect, it} from "vitest";
import {probeRpcServer} from "../../../main/engine/rpc/probeRpcServer.js";
import {isLoopbackHost, parseRpcEndpoint, rpcExposureWarning} from "../../../main/engine/rpc/rpcEndpoint.js";

type Behaviour = {version?: [number, number, number]; devices?: {free: bigint; total: bigint}[]; silent?: boolean; garbage?: boolean};

const servers: net.Server[] = [];
afterEach(async () => {
    await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

/** A TCP server answering HELLO, DEVICE_COUNT and GET_DEVICE_MEMORY as ggml-rpc.cpp's rpc_serve_client does. */
async function fakeRpcServer(behaviour: Behaviour): Promise<{endpoint: string; commands: number[]}> {
    const commands: number[] = [];
    const server = net.createServer((socket) => {
        let buffer = Buffer.alloc(0);
        socket.on("error", () => {});
        socket.on("data", (chunk) => {
            buffer = Buffer.concat([buffer, chunk]);
            if (behaviour.silent) return;
            if (behaviour.garbage) {
                socket.end("HTTP/1.1 400 Bad Request\r\n\r\n");
                return;
            }
            while (buffer.length >= 9) {
                const cmd = buffer.readUInt8(0);
                const size = Number(buffer.readBigUInt64LE(1));
                if (buffer.length < 9 + size) return;
                const payload = buffer.subarray(9, 9 + size);
                buffer = buffer.subarray(9 + size);
                commands.push(cmd);
                const reply = (body: Buffer) => {
                    const header = Buffer.alloc(8);
                    header.writeBigUInt64LE(BigInt(body.length));
                    socket.write(Buffer.concat([header, body]));
                };
                if (cmd === 14) {
                    expect(size).toBe(24);
                    const body = Buffer.alloc(28);
                    const [major, minor, patch] = behaviour.version ?? [7, 0, 0];
                    body.writeUInt8(major, 0);
                    body.writeUInt8(minor, 1);
                    body.writeUInt8(patch, 2);
                    reply(body);
                } else if (cmd === 15) {
                    const body = Buffer.alloc(4);
                    body.writeUInt32LE(behaviour.devices?.length ?? 1);
                    reply(body);
                } else if (cmd === 11) {
                    const device = (behaviour.devices ?? [{free: 1n << 30n, total: 2n << 30n}])[payload.readUInt32LE(0)]!;
                    const body = Buffer.alloc(16);
                    body.writeBigUInt64LE(device.free, 0);
                    body.writeBigUInt64LE(device.total, 8);
                    reply(body);
                } else socket.destroy();
            }
        });
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return {endpoint: `127.0.0.1:${(server.address() as net.AddressInfo).port}`, commands};
}

describe("probeRpcServer", () => {
    it("reads the protocol and every device's memory from an rpc-server", async () => {
        const {endpoint, commands} = await fakeRpcServer({
            version: [7, 0, 3],
            devices: [
                {free: 5n << 30n, total: 8n << 30n},
                {free: 1n << 20n, total: 2n << 20n}
            ]
        });
        const probe = await probeRpcServer(endpoint, {expected: {major: 7, minor: 0, patch: 0}});
        expect(probe).toMatchObject({
            ok: true,
            endpoint,
            protocol: {major: 7, minor: 0, patch: 3},
            devices: [
                {index: 0, freeBytes: 5 * 2 ** 30, totalBytes: 8 * 2 ** 30},
                {index: 1, freeBytes: 2 ** 20, totalBytes: 2 * 2 ** 20}
            ]
        });
        expect(commands).toEqual([14, 15, 11, 11]);
    });

    it("refuses another major version, or a newer minor, before anything else is asked", async () => {
        const older = await fakeRpcServer({version: [6, 1, 0]});
        const probe = await probeRpcServer(older.endpoint, {expected: {major: 7, minor: 0, patch: 0}});
        expect(probe.ok).toBe(false);
        expect(!probe.ok && probe.error).toMatch(/protocol 6\.1\.0, this engine 7\.0\.0/);
        expect(older.commands).toEqual([14]);
        const newer = await fakeRpcServer({version: [7, 2, 0]});
        expect((await probeRpcServer(newer.endpoint, {expected: {major: 7, minor: 0, patch: 0}})).ok).toBe(false);
    });

    it("says what is wrong with a port where nothing listens, a server that is not an rpc-server, and one that never answers", async () => {
        const closed = await fakeRpcServer({});
        await new Promise((resolve) => servers.pop()!.close(resolve));
        const refused = await probeRpcServer(closed.endpoint);
        expect(!refused.ok && refused.error).toMatch(/connection refused/);

        const http = await fakeRpcServer({garbage: true});
        const garbage = await probeRpcServer(http.endpoint);
        expect(garbage.ok).toBe(false);
        expect(!garbage.ok && garbage.error).toMatch(/not an rpc-server|closed the connection/);

        const silent = await fakeRpcServer({silent: true});
        const started = Date.now();
        const busy = await probeRpcServer(silent.endpoint, {timeoutMs: 300});
        expect(Date.now() - started).toBeLessThan(2000);
        expect(!busy.ok && busy.error).toMatch(/no answer within 0\.3 s.*one client at a time/);
    });

    it("refuses an address that is not host:port without connecting", async () => {
        for (const bad of ["", "localhost", ":50052", "host:", "host:0", "host:70000", "[::1]:50052", "::1:50052", "bad host:1", "-x:1"]) {
            const probe = await probeRpcServer(bad);
            expect(probe.ok, bad).toBe(false);
        }
    });
});

describe("rpc-server addresses", () => {
    it("parses host:port as ggml does and normalises it", () => {
        expect(parseRpcEndpoint(" 192.168.1.20:50052 ")).toEqual({host: "192.168.1.20", port: 50052, endpoint: "192.168.1.20:50052"});
        expect(parseRpcEndpoint("gpu-box.local:1")).toMatchObject({host: "gpu-box.local", port: 1});
        expect(() => parseRpcEndpoint("gpu-box")).toThrow(/not host:port/);
        expect(() => parseRpcEndpoint("::1:50052")).toThrow(/IPv6/);
        expect(() => parseRpcEndpoint("a:b")).toThrow(/not a port/);
    });

    it("warns in words about any address that is not this machine's", () => {
        expect(isLoopbackHost("127.0.0.1")).toBe(true);
        expect(isLoopbackHost("127.3.2.1")).toBe(true);
        expect(isLoopbackHost("localhost")).toBe(true);
        expect(isLoopbackHost("192.168.1.20")).toBe(false);
        expect(isLoopbackHost("127.example.com")).toBe(false);
        expect(rpcExposureWarning("127.0.0.1")).toBeNull();
        expect(rpcExposureWarning("10.0.0.5")).toMatch(/no authentication.*never on an open one/);
    });
});
