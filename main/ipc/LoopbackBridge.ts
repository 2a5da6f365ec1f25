import {randomBytes, timingSafeEqual} from "node:crypto";
import fs from "node:fs/promises";
import http from "node:http";
import path from "node:path";
import type {AddressInfo} from "node:net";
import {WebSocketServer, type WebSocket} from "ws";
import type {BridgeEventFrame, BridgeRequestFrame, BridgeResponseFrame, EventChannel, Events} from "../../preload/contract.js";
import {ConnectionGuard, connectionsCheckingIntervalMs} from "../net/ConnectionGuard.js";
import type {Dispatch} from "./dispatch.js";

export type LoopbackBridgeOptions = {
    dispatch: Dispatch;
    /** Folder of the built renderer to serve; `null` serves the bridge only. */
    staticDir: string | null;
    /** Port on 127.0.0.1; `0` picks a free one. Defaults to `0`. */
    port?: number;
    /** Shared secret a page must present; random when unset. */
    token?: string;
    /** Open WebSocket connections at most; more are refused with 503. Defaults to `16`. */
    maxClients?: number;
    /**
     * Open TCP connections at most (pages, assets and sockets); past it the oldest idle one is closed, or the new one
     * when every one serves a request. Defaults to `128`.
     */
    maxConnections?: number;
    /** Time a client has to send a request's line and headers, in milliseconds. Defaults to `5000`. */
    headersTimeoutMs?: number;
    /** Largest request frame in bytes; a larger one closes that socket (1009). Defaults to `1048576`. */
    maxFrameBytes?: number;
    /** Where errors no request can be answered with go. Defaults to `console.error`. */
    log?: (message: string, err: unknown) => void;
};

const contentTypes: Record<string, string> = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".woff2": "font/woff2",
    ".woff": "font/woff",
    ".ttf": "font/ttf",
    ".json": "application/json"
};

/**
 * The IPC contract over a loopback WebSocket, for browser tests and the headless mode. Listens on
 * 127.0.0.1 only, requires a random token and a same-origin page, and goes through the same
 * dispatch (schemas, error envelope) as Electron IPC. No request can take the process down: every
 * listener catches its errors, sockets and frames are capped.
 */
export class LoopbackBridge {
    readonly token: string;
    private readonly _server: http.Server;
    private readonly _wss: WebSocketServer;
    private readonly _clients = new Set<WebSocket>();
    private readonly _log: (message: string, err: unknown) => void;
    private readonly _guard: ConnectionGuard;

    private constructor(private readonly _options: LoopbackBridgeOptions) {
        this.token = _options.token ?? randomBytes(24).toString("hex");
        this._log = _options.log ?? ((message, err) => console.error(message, err));
        this._server = http.createServer({connectionsCheckingInterval: connectionsCheckingIntervalMs}, (req, res) => {
            this._serveStatic(req, res).catch((err: unknown) => {
                this._log("Loopback request failed", err);
                if (!res.headersSent) res.writeHead(500).end();
                else res.destroy();
            });
        });
        // Idle and slow clients time out in seconds, and cannot hold the connections a page needs (see ConnectionGuard).
        this._guard = new ConnectionGuard(this._server, {
            maxConnections: _options.maxConnections,
            headersTimeoutMs: _options.headersTimeoutMs,
            requestTimeoutMs: 10_000
        });
        this._wss = new WebSocketServer({noServer: true, maxPayload: _options.maxFrameBytes ?? 1024 * 1024});
        this._server.on("upgrade", (req, socket, head) => {
            socket.on("error", () => socket.destroy());
            try {
                const refusal = this._refusal(req);
                if (refusal != null) {
                    socket.end(`HTTP/1.1 ${refusal}\r\nConnection: close\r\n\r\n`);
                    socket.destroy();
                    return;
                }
                this._wss.handleUpgrade(req, socket, head, (ws) => this._accept(ws));
            } catch (err) {
                this._log("Loopback upgrade failed", err);
                socket.destroy();
            }
        });
    }

    static async start(options: LoopbackBridgeOptions): Promise<LoopbackBridge> {
        const bridge = new LoopbackBridge(options);
        await new Promise<void>((resolve, reject) => {
            bridge._server.once("error", reject);
            bridge._server.listen(options.port ?? 0, "127.0.0.1", () => resolve());
        });
        return bridge;
    }

    get port(): number {
        return (this._server.address() as AddressInfo).port;
    }

    /** The page to open: the renderer with the token in its query. */
    get url(): string {
        return `http://127.0.0.1:${this.port}/?token=${this.token}`;
    }

    emit<C extends EventChannel>(channel: C, payload: Events[C]): void {
        const frame: BridgeEventFrame = {event: channel, payload};
        const text = JSON.stringify(frame);
        for (const client of this._clients)
            if (client.readyState === client.OPEN) client.send(text, (err) => err != null && client.terminate());
    }

    async dispose(): Promise<void> {
        for (const client of this._clients) client.terminate();
        this._wss.close();
        const closed = new Promise<void>((resolve) => this._server.close(() => resolve()));
        this._guard.destroyAll();
        await closed;
    }

    /** Why an upgrade is refused (a status line), or `null` to accept it. */
    private _refusal(req: http.IncomingMessage): string | null {
        let url: URL;
        try {
            url = new URL(req.url ?? "/", "http://127.0.0.1");
        } catch {
            return "400 Bad Request";
        }
        if (url.pathname !== "/bridge") return "403 Forbidden";
        const origin = req.headers.origin;
        if (origin != null && origin !== `http://127.0.0.1:${this.port}` && origin !== `http://localhost:${this.port}`)
            return "403 Forbidden";
        const given = Buffer.from(url.searchParams.get("token") ?? "");
        const expected = Buffer.from(this.token);
        if (given.length !== expected.length || !timingSafeEqual(given, expected)) return "403 Forbidden";
        if (this._clients.size >= (this._options.maxClients ?? 16)) return "503 Service Unavailable";
        return null;
    }

    private _accept(ws: WebSocket): void {
        this._clients.add(ws);
        ws.on("close", () => this._clients.delete(ws));
        // ws reports a bad or oversized frame as an error and closes the socket; unheard, it would throw.
        ws.on("error", () => ws.terminate());
        ws.on("message", (data) => {
            this._answer(ws, data).catch((err: unknown) => this._log("Loopback frame failed", err));
        });
    }

    private async _answer(ws: WebSocket, data: unknown): Promise<void> {
        let frame: BridgeRequestFrame;
        try {
            frame = JSON.parse(String(data)) as BridgeRequestFrame;
        } catch {
            return;
        }
        if (frame == null || typeof frame !== "object" || typeof frame.id !== "number") return;
        const response: BridgeResponseFrame = {id: frame.id, result: await this._options.dispatch(frame.channel, frame.payload)};
        if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(response), (err) => err != null && ws.terminate());
    }

    private async _serveStatic(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
        const root = this._options.staticDir;
        if (root == null || (req.method !== "GET" && req.method !== "HEAD")) {
            res.writeHead(404).end();
            return;
        }
        let pathname: string;
        try {
            pathname = decodeURIComponent(new URL(req.url ?? "/", "http://127.0.0.1").pathname);
        } catch {
            res.writeHead(400).end();
            return;
        }
        const file = path.resolve(root, "." + (pathname === "/" ? "/index.html" : pathname));
        if (!file.startsWith(path.resolve(root) + path.sep)) {
            res.writeHead(403).end();
            return;
        }
        try {
            const body = await fs.readFile(file);
            res.writeHead(200, {
                "content-type": contentTypes[path.extname(file)] ?? "application/octet-stream",
                "x-content-type-options": "nosniff",
                "cache-control": "no-store"
            });
            res.end(req.method === "HEAD" ? undefined : body);
        } catch {
            res.writeHead(404).end();
        }
    }
}
