import type http from "node:http";
import type {Socket} from "node:net";

export type ConnectionGuardOptions = {
    /** Open TCP connections at most; past it the oldest idle one is closed, or the new one when none is idle. Defaults to `128`. */
    maxConnections?: number;
    /** Time a connection has to send its whole request line and headers, in milliseconds. Defaults to `5000`. */
    headersTimeoutMs?: number;
    /** Time a connection has to send its whole request, body included, in milliseconds. Defaults to `30000`. */
    requestTimeoutMs?: number;
    /** Time an idle keep-alive connection stays open after a response, in milliseconds. Defaults to `5000`. */
    keepAliveTimeoutMs?: number;
};

/** How often Node's HTTP server checks the header and request deadlines; passed to `http.createServer`. */
export const connectionsCheckingIntervalMs = 500;

/**
 * Keeps idle and slow clients from holding an HTTP server's connections: a request line and headers must arrive within
 * seconds and a body within its own deadline (Node answers 408 and closes), and when the connection cap is reached
 * the oldest connection with no request in progress makes room for the new one. A connection serving a request, or
 * upgraded to a WebSocket, is never closed for room, so a page's bridge survives a flood of idle sockets.
 */
export class ConnectionGuard {
    /** Open sockets, oldest first, and whether each serves a request now (or was upgraded). */
    private readonly _sockets = new Map<Socket, {busy: boolean}>();
    private readonly _max: number;

    constructor(server: http.Server, options: ConnectionGuardOptions = {}) {
        this._max = options.maxConnections ?? 128;
        server.headersTimeout = options.headersTimeoutMs ?? 5000;
        server.requestTimeout = options.requestTimeoutMs ?? 30_000;
        server.keepAliveTimeout = options.keepAliveTimeoutMs ?? 5000;
        server.on("connection", (socket: Socket) => this._connect(socket));
        server.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => {
            const entry = this._sockets.get(req.socket);
            if (entry == null) return;
            entry.busy = true;
            res.once("close", () => {
                entry.busy = false;
            });
        });
        server.on("upgrade", (req: http.IncomingMessage) => {
            const entry = this._sockets.get(req.socket);
            if (entry != null) entry.busy = true;
        });
    }

    /** Connections open now. */
    get size(): number {
        return this._sockets.size;
    }

    /** Every open connection, for a server's dispose. */
    destroyAll(): void {
        for (const socket of this._sockets.keys()) socket.destroy();
    }

    private _connect(socket: Socket): void {
        socket.on("error", () => socket.destroy());
        if (this._sockets.size >= this._max) {
            const idle = [...this._sockets].find(([, entry]) => !entry.busy)?.[0];
            if (idle == null) {
                socket.destroy();
                return;
            }
            this._sockets.delete(idle);
            idle.destroy();
        }
        this._sockets.set(socket, {busy: false});
        socket.once("close", () => this._sockets.delete(socket));
    }
}
