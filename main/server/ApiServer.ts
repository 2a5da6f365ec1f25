import http from "node:http";
import type {AddressInfo} from "node:net";
import type {ServerRequestLog} from "../../preload/contract.js";
import {AppError} from "../AppError.js";
import {checkAccess, isLoopback} from "../net/accessControl.js";
import {ConnectionGuard, connectionsCheckingIntervalMs} from "../net/ConnectionGuard.js";
import {readJsonBody} from "../net/readJsonBody.js";
import type {HttpRefusal} from "../net/types.js";
import {writeJson} from "../net/writeJson.js";
import {parseOpenAiRequest, toCompletionRequest, type OpenAiRequest} from "./openaiRequest.js";
import {OpenAiResponse} from "./OpenAiResponse.js";
import {apiError, toApiError, toUsage, type ApiError} from "./openaiWire.js";
import {RequestLog} from "./RequestLog.js";
import type {ApiBackend} from "./types.js";

export type {ApiBackend};

export type ApiServerOptions = {
    backend: ApiBackend;
    /** Address to listen on. Defaults to `127.0.0.1`. */
    host?: string;
    /** Port; `0` picks a free one. Defaults to `0`. */
    port?: number;
    /** SHA-256 of the API key clients must send as a bearer token; `null` for none (loopback only). */
    keyHash: Buffer | null;
    /** Browser origins allowed by CORS. Defaults to none. */
    corsOrigins?: string[];
    /** Streamed events written within this many milliseconds reach the socket together. Defaults to `16`. */
    streamFlushMs?: number;
    /** Largest request body, in bytes. Defaults to `4 MiB`. */
    maxBodyBytes?: number;
    /** Open connections at most; past it the oldest idle one is closed. Defaults to `128`. */
    maxConnections?: number;
    /** Time a client has to send a request's line and headers, in milliseconds. Defaults to `5000`. */
    headersTimeoutMs?: number;
    /** Time a client has to send a whole request, body included, in milliseconds. Defaults to `60000`. */
    requestTimeoutMs?: number;
    /** Each request's log entry, whenever it changes. */
    onLog?(entry: ServerRequestLog): void;
    /** Where an error no request can be answered with goes. Defaults to `console.error`. */
    logError?: (message: string, err: unknown) => void;
    now?: () => number;
};

/** A request being served: its response, its log entry, and the abort its generation hears when the client leaves. */
type Exchange = {req: http.IncomingMessage; res: http.ServerResponse; log: RequestLog; abort: AbortController};

/**
 * The OpenAI-compatible HTTP API over Ponder's engine: `GET /v1/models`, `POST /v1/chat/completions` and
 * `POST /v1/completions`, streaming as server-sent events or not. Bodies are validated with zod at the edge;
 * every failure is an OpenAI-style error object. A closed connection aborts its generation.
 */
export class ApiServer {
    private readonly _server: http.Server;
    private readonly _now: () => number;
    private readonly _guard: ConnectionGuard;

    private constructor(private readonly _options: ApiServerOptions) {
        this._now = _options.now ?? Date.now;
        // No exception from the HTTP edge may reach the process: whatever escapes a handler ends that request only.
        // A request without Host reaches checkAccess, which says so in words (Node's own refusal is an empty 400).
        this._server = http.createServer(
            {connectionsCheckingInterval: connectionsCheckingIntervalMs, requireHostHeader: false},
            (req, res) => {
                this._handle(req, res).catch((err: unknown) => this._lastResort(res, err));
            }
        );
        this._server.on("connection", (socket) => socket.setNoDelay(true));
        this._guard = new ConnectionGuard(this._server, {
            maxConnections: _options.maxConnections,
            headersTimeoutMs: _options.headersTimeoutMs,
            requestTimeoutMs: _options.requestTimeoutMs ?? 60_000
        });
    }

    static async start(options: ApiServerOptions): Promise<ApiServer> {
        const host = options.host ?? "127.0.0.1";
        if (!isLoopback(host) && options.keyHash == null)
            throw new AppError("BAD_REQUEST", `An API key is required to listen on ${host}: generate one first, or listen on 127.0.0.1`);
        const server = new ApiServer(options);
        await new Promise<void>((resolve, reject) => {
            server._server.once("error", (err: NodeJS.ErrnoException) =>
                reject(
                    new AppError(
                        "BAD_REQUEST",
                        err.code === "EADDRINUSE"
                            ? `Port ${options.port} on ${host} is in use: choose another port`
                            : `Could not listen on ${host}:${options.port}: ${err.message}`
                    )
                )
            );
            server._server.listen(options.port ?? 0, host, () => resolve());
        });
        return server;
    }

    get port(): number {
        return (this._server.address() as AddressInfo).port;
    }

    get host(): string {
        return this._options.host ?? "127.0.0.1";
    }

    /** The base URL OpenAI clients take. */
    get url(): string {
        const host = this.host.includes(":") ? `[${this.host}]` : this.host;
        return `http://${host === "0.0.0.0" || host === "[::]" ? "127.0.0.1" : host}:${this.port}/v1`;
    }

    /** Changes the key and the allowed origins without closing the listener. */
    configure(access: Pick<ApiServerOptions, "keyHash" | "corsOrigins">): void {
        this._options.keyHash = access.keyHash;
        this._options.corsOrigins = access.corsOrigins;
    }

    /** Stops listening and ends open connections (their generations abort). */
    async dispose(): Promise<void> {
        const closed = new Promise<void>((resolve) => this._server.close(() => resolve()));
        this._guard.destroyAll();
        await closed;
    }

    /** An error that escaped every handler: a 500 if nothing was sent yet, else the connection ends. */
    private _lastResort(res: http.ServerResponse, err: unknown): void {
        (this._options.logError ?? ((message, error) => console.error(message, error)))("API request failed", err);
        try {
            if (!res.headersSent && !res.destroyed)
                writeJson(res, 500, {error: {message: "Internal error", type: "server_error", param: null, code: "internal_error"}});
            else res.destroy();
        } catch {
            res.destroy();
        }
    }

    private async _handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
        const pathname = requestPath(req.url);
        const exchange: Exchange = {
            req,
            res,
            log: new RequestLog(req, pathname, this._now, this._options.onLog),
            abort: new AbortController()
        };
        res.on("close", () => {
            if (!res.writableFinished) exchange.abort.abort();
        });
        try {
            if (pathname == null)
                return this._fail(
                    exchange,
                    apiError(400, `The request target ${JSON.stringify(String(req.url).slice(0, 200))} is not a path or an http URL`, {
                        code: "invalid_target"
                    })
                );
            const refusal = checkAccess(req, res, {
                host: this.host,
                keyHash: this._options.keyHash,
                corsOrigins: this._options.corsOrigins
            });
            if (refusal != null) return this._fail(exchange, fromRefusal(refusal));
            if (req.method === "OPTIONS") {
                res.writeHead(204).end();
                return;
            }
            const route = `${req.method} ${pathname}`;
            if (route === "GET /v1/models") return this._models(exchange);
            if (route === "POST /v1/chat/completions" || route === "POST /v1/completions") {
                const body = await readJsonBody(req, res, this._options.maxBodyBytes ?? 4 * 1024 * 1024);
                if ("status" in body) return this._fail(exchange, fromRefusal(body));
                const request = parseOpenAiRequest(route === "POST /v1/chat/completions" ? "chat" : "completion", body.json);
                if ("status" in request) return this._fail(exchange, request);
                return await this._complete(exchange, request);
            }
            if (["/v1/models", "/v1/chat/completions", "/v1/completions"].includes(pathname))
                return this._fail(exchange, apiError(405, `${req.method} is not allowed on ${pathname}`, {code: "method_not_allowed"}));
            return this._fail(
                exchange,
                apiError(
                    404,
                    `No route ${req.method} ${pathname}: this server serves /v1/models, /v1/chat/completions and /v1/completions`,
                    {code: "not_found"}
                )
            );
        } catch (err) {
            return this._fail(exchange, toApiError(err));
        }
    }

    private _models(exchange: Exchange): void {
        const model = this._options.backend.model();
        const data =
            model == null ? [] : [{id: model.id, object: "model", created: Math.floor(model.createdAt / 1000), owned_by: "ponder"}];
        writeJson(exchange.res, 200, {object: "list", data});
    }

    /** Generates for a chat or text completion request, and answers in OpenAI's format (OpenAiResponse). */
    private async _complete(exchange: Exchange, request: OpenAiRequest): Promise<void> {
        const {res, log} = exchange;
        const {backend} = this._options;
        const model = backend.model();
        if (model == null)
            return this._fail(
                exchange,
                apiError(503, "No model is loaded in Ponder: load one in the app first", {code: "model_not_loaded"})
            );
        if (request.body.model !== model.id)
            return this._fail(
                exchange,
                apiError(
                    404,
                    `The model ${JSON.stringify(request.body.model)} is not served here: this server serves ${JSON.stringify(model.id)}`,
                    {param: "model", code: "model_not_found"}
                )
            );

        const response = new OpenAiResponse(res, request, {
            logId: log.entry.id,
            model: model.id,
            created: Math.floor(this._now() / 1000),
            flushMs: this._options.streamFlushMs ?? 16
        });
        const completion = toCompletionRequest(request, backend.defaults(), {
            signal: exchange.abort.signal,
            onStart: () => {
                log.running();
                response.open();
            },
            onChunk: (chunk) => {
                log.chunk(chunk);
                response.chunk(chunk);
            },
            onSample: (sample) => log.sample(sample)
        });
        log.queued(response.stream, completion.policy);
        try {
            const result = await backend.complete(completion);
            if (result == null) return log.close({state: "aborted"}); // its client left while it waited
            const usage = toUsage(result);
            log.result(result, usage);
            if (result.stopReason === "abort") {
                log.close({state: "aborted"});
                response.abandon();
                return;
            }
            response.finish(result, usage);
            log.close({state: "done"});
        } catch (err) {
            const error = toApiError(err);
            if (!res.headersSent) return this._fail(exchange, error);
            // Mid-stream: the error travels as an event.
            response.failMidStream(error);
            log.close({state: "error", httpStatus: error.status, error: error.error.message});
        }
    }

    private _fail(exchange: Exchange, error: ApiError): void {
        const {res, log} = exchange;
        if (!res.headersSent && !res.destroyed) {
            if (error.status === 401) res.setHeader("www-authenticate", "Bearer");
            writeJson(res, error.status, {error: error.error});
        }
        log.close({state: "error", httpStatus: error.status, error: error.error.message});
    }
}

/**
 * The path a request target names, with repeated slashes merged and a trailing one dropped (`///v1/models/` is
 * `/v1/models`), or `null` for a target that is neither a path nor an http URL. Never throws.
 */
export function requestPath(target: string | undefined): string | null {
    let path: string;
    if (target == null || target === "") return null;
    if (target.startsWith("/")) path = target.replace(/[?#].*$/s, "");
    else if (/^https?:\/\//i.test(target)) {
        if (!URL.canParse(target)) return null;
        path = new URL(target).pathname;
    } else return null;
    return path.replace(/\/{2,}/g, "/").replace(/(.)\/$/, "$1");
}

/** A refusal of the HTTP plumbing as an OpenAI error object. */
function fromRefusal(refusal: HttpRefusal): ApiError {
    return apiError(refusal.status, refusal.message, {code: refusal.code});
}
