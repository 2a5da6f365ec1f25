import {createHash, randomUUID, timingSafeEqual} from "node:crypto";
import http from "node:http";
import type {AddressInfo} from "node:net";
import type {ServerRequestLog} from "../../preload/contract.js";
import {AppError} from "../AppError.js";
import type {CompletionRequest, CompletionResult} from "../services/CompletionService.js";
import {QueueAbortError} from "../services/GenerationQueue.js";
import {chatCompletionRequestSchema, completionRequestSchema, type PonderExtension} from "./openaiSchemas.js";
import {EventStream} from "./EventStream.js";
import {ConnectionGuard, connectionsCheckingIntervalMs} from "./ConnectionGuard.js";
import {apiError, finishReason, fromZod, ponderStop, stopList, toApiError, toTurns, toUsage, type ApiError} from "./openaiWire.js";

/** What the server needs from the app: the model it serves and generations. Nothing else (no database, no files). */
export type ApiBackend = {
    /** The model served, or `null` when none is loaded. */
    model(): {id: string, createdAt: number} | null,
    /** The request's defaults: the server's policy and budget, the app's sampling defaults. */
    defaults(): Pick<CompletionRequest, "policy" | "budget" | "temperature" | "maxTokens">,
    complete(request: CompletionRequest): Promise<CompletionResult>
};

export type ApiServerOptions = {
    backend: ApiBackend,
    /** Address to listen on. Defaults to `127.0.0.1`. */
    host?: string,
    /** Port; `0` picks a free one. Defaults to `0`. */
    port?: number,
    /** SHA-256 of the API key clients must send as a bearer token; `null` for none (loopback only). */
    keyHash: Buffer | null,
    /** Browser origins allowed by CORS. Defaults to none. */
    corsOrigins?: string[],
    /** Streamed events written within this many milliseconds reach the socket together. Defaults to `16`. */
    streamFlushMs?: number,
    /** Largest request body, in bytes. Defaults to `4 MiB`. */
    maxBodyBytes?: number,
    /** Open connections at most; past it the oldest idle one is closed. Defaults to `128`. */
    maxConnections?: number,
    /** Time a client has to send a request's line and headers, in milliseconds. Defaults to `5000`. */
    headersTimeoutMs?: number,
    /** Time a client has to send a whole request, body included, in milliseconds. Defaults to `60000`. */
    requestTimeoutMs?: number,
    /** Each request's log entry, whenever it changes. */
    onLog?(entry: ServerRequestLog): void,
    /** Where an error no request can be answered with goes. Defaults to `console.error`. */
    logError?: (message: string, err: unknown) => void,
    now?: () => number
};

const loopbackHosts = new Set(["127.0.0.1", "::1", "localhost"]);

export function isLoopback(host: string): boolean {
    return loopbackHosts.has(host) || /^127\.\d+\.\d+\.\d+$/.test(host);
}

export function hashKey(key: string): Buffer {
    return createHash("sha256").update(key).digest();
}

type Context = {req: http.IncomingMessage, res: http.ServerResponse, log: ServerRequestLog, abort: AbortController};

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
        // A request without Host reaches _refuse, which says so in words (Node's own refusal is an empty 400).
        this._server = http.createServer({connectionsCheckingInterval: connectionsCheckingIntervalMs, requireHostHeader: false}, (req, res) => {
            this._handle(req, res).catch((err: unknown) => this._lastResort(res, err));
        });
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
            server._server.once("error", (err: NodeJS.ErrnoException) => reject(new AppError("BAD_REQUEST",
                err.code === "EADDRINUSE" ? `Port ${options.port} on ${host} is in use: choose another port` : `Could not listen on ${host}:${options.port}: ${err.message}`)));
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
            if (!res.headersSent && !res.destroyed) {
                const body = JSON.stringify({error: {message: "Internal error", type: "server_error", param: null, code: "internal_error"}});
                res.writeHead(500, {"content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(body)}).end(body);
            } else
                res.destroy();
        } catch {
            res.destroy();
        }
    }

    private async _handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
        const pathname = requestPath(req.url);
        const log: ServerRequestLog = {
            id: randomUUID(), startedAt: this._now(), client: describeClient(req), method: req.method ?? "GET", path: pathname ?? String(req.url).slice(0, 200),
            state: "running", httpStatus: null, stream: false, promptTokens: 0, thinkingTokens: 0, answerTokens: 0, tokensPerSecond: null,
            firstTokenMs: null, totalMs: null, policy: null, budgetCells: null, sample: null, error: null
        };
        const context: Context = {req, res, log, abort: new AbortController()};
        res.on("close", () => {
            if (!res.writableFinished)
                context.abort.abort();
        });
        try {
            if (pathname == null)
                return this._fail(context, apiError(400, `The request target ${JSON.stringify(String(req.url).slice(0, 200))} is not a path or an http URL`, {code: "invalid_target"}));
            const refusal = this._refuse(req, res);
            if (refusal != null)
                return this._fail(context, refusal);
            if (req.method === "OPTIONS") {
                res.writeHead(204).end();
                return;
            }
            const route = `${req.method} ${pathname}`;
            if (route === "GET /v1/models")
                return this._models(context);
            if (route === "POST /v1/chat/completions" || route === "POST /v1/completions") {
                const body = await this._readBody(req, res);
                if ("status" in body)
                    return this._fail(context, body);
                return route === "POST /v1/chat/completions" ? await this._chat(context, body.json) : await this._completion(context, body.json);
            }
            if (["/v1/models", "/v1/chat/completions", "/v1/completions"].includes(pathname))
                return this._fail(context, apiError(405, `${req.method} is not allowed on ${pathname}`, {code: "method_not_allowed"}));
            return this._fail(context, apiError(404, `No route ${req.method} ${pathname}: this server serves /v1/models, /v1/chat/completions and /v1/completions`, {code: "not_found"}));
        } catch (err) {
            return this._fail(context, toApiError(err));
        }
    }

    /** Host (DNS rebinding), origin (CORS) and key checks; sets the CORS headers of an allowed origin. */
    private _refuse(req: http.IncomingMessage, res: http.ServerResponse): ApiError | null {
        if (isLoopback(this.host)) {
            if (req.headers.host == null || req.headers.host === "")
                return apiError(400, "The request has no Host header: HTTP/1.1 requires one (this server answers on loopback addresses only)", {code: "missing_host"});
            const hostname = req.headers.host.replace(/:\d+$/, "").replace(/^\[(.*)\]$/, "$1");
            if (!isLoopback(hostname))
                return apiError(403, `Host ${JSON.stringify(req.headers.host)} refused: this server answers on loopback addresses only`, {code: "forbidden_host"});
        }
        const origin = req.headers.origin;
        if (origin != null) {
            if (!(this._options.corsOrigins ?? []).includes(origin))
                return apiError(403, `Origin ${origin} is not allowed: add it to the server's allowed origins`, {code: "forbidden_origin"});
            res.setHeader("access-control-allow-origin", origin);
            res.setHeader("vary", "Origin");
            res.setHeader("access-control-allow-headers", "authorization, content-type");
            res.setHeader("access-control-allow-methods", "GET, POST, OPTIONS");
            res.setHeader("access-control-max-age", "600");
            if (req.method === "OPTIONS")
                return null; // a preflight carries no credentials
        }
        const expected = this._options.keyHash;
        if (expected != null) {
            const match = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? "");
            if (match == null)
                return apiError(401, "An API key is required: send it as Authorization: Bearer <key>", {code: "invalid_api_key"});
            if (!timingSafeEqual(hashKey(match[1]!), expected))
                return apiError(401, "The API key is wrong", {code: "invalid_api_key"});
        }
        return null;
    }

    private async _readBody(req: http.IncomingMessage, res: http.ServerResponse): Promise<{json: unknown} | ApiError> {
        const limit = this._options.maxBodyBytes ?? 4 * 1024 * 1024;
        if (!/^application\/json\b/i.test(req.headers["content-type"] ?? ""))
            return apiError(415, "The body must be JSON, sent with Content-Type: application/json", {code: "unsupported_media_type"});
        const tooLarge = () => {
            // The rest of the upload is read and dropped, so the client gets the answer; then the connection closes.
            res.shouldKeepAlive = false;
            req.resume();
            return apiError(413, `The body is larger than the limit of ${limit} bytes`, {code: "body_too_large"});
        };
        if (Number(req.headers["content-length"] ?? 0) > limit)
            return tooLarge();
        const text = await new Promise<string | null>((resolve, reject) => {
            const chunks: Buffer[] = [];
            let size = 0;
            const onData = (chunk: Buffer) => {
                size += chunk.length;
                if (size > limit) {
                    req.off("data", onData);
                    resolve(null);
                } else
                    chunks.push(chunk);
            };
            req.on("data", onData);
            req.once("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
            req.once("error", reject);
        });
        if (text == null)
            return tooLarge();
        try {
            return {json: JSON.parse(text)};
        } catch (err) {
            return apiError(400, `The body is not valid JSON: ${(err as Error).message}`, {code: "invalid_json"});
        }
    }

    private _models(context: Context): void {
        const model = this._options.backend.model();
        const data = model == null ? [] : [{id: model.id, object: "model", created: Math.floor(model.createdAt / 1000), owned_by: "ponder"}];
        this._json(context, 200, {object: "list", data});
    }

    private async _chat(context: Context, json: unknown): Promise<void> {
        const parsed = chatCompletionRequestSchema.safeParse(json);
        if (!parsed.success)
            return this._fail(context, fromZod(parsed.error));
        const body = parsed.data;
        const turns = toTurns(body.messages);
        if ("status" in turns)
            return this._fail(context, turns);
        await this._generate(context, "chat", body, {
            ...turns,
            maxTokens: body.max_completion_tokens ?? body.max_tokens ?? undefined,
            includeUsage: body.stream_options?.include_usage === true
        });
    }

    private async _completion(context: Context, json: unknown): Promise<void> {
        const parsed = completionRequestSchema.safeParse(json);
        if (!parsed.success)
            return this._fail(context, fromZod(parsed.error));
        const body = parsed.data;
        const prompt = typeof body.prompt === "string" ? body.prompt : body.prompt[0]!;
        if (prompt.trim() === "")
            return this._fail(context, apiError(400, "prompt is empty", {param: "prompt"}));
        await this._generate(context, "completion", body, {
            systemPrompt: "",
            history: [{role: "user", text: prompt}],
            maxTokens: body.max_tokens ?? undefined,
            includeUsage: body.stream_options?.include_usage === true
        });
    }

    private async _generate(context: Context, kind: "chat" | "completion",
        body: {
            model: string, stream?: boolean | null, temperature?: number | null, seed?: number | null, stop?: string | string[] | null,
            top_p?: number | null, top_k?: number | null, min_p?: number | null, repeat_penalty?: number | null, ponder?: PonderExtension
        },
        input: Pick<CompletionRequest, "systemPrompt" | "history"> & {maxTokens: number | undefined, includeUsage: boolean}): Promise<void> {
        const {res, log} = context;
        const model = this._options.backend.model();
        if (model == null)
            return this._fail(context, apiError(503, "No model is loaded in Ponder: load one in the app first", {code: "model_not_loaded"}));
        if (body.model !== model.id)
            return this._fail(context, apiError(404, `The model ${JSON.stringify(body.model)} is not served here: this server serves ${JSON.stringify(model.id)}`, {param: "model", code: "model_not_found"}));

        const defaults = this._options.backend.defaults();
        const budget = body.ponder?.budget;
        const stream = body.stream === true;
        const id = `${kind === "chat" ? "chatcmpl" : "cmpl"}-${log.id}`;
        const created = Math.floor(this._now() / 1000);
        const object = kind === "chat" ? "chat.completion.chunk" : "text_completion";
        log.stream = stream;
        log.state = "queued";
        log.policy = body.ponder?.policy ?? defaults.policy;
        this._log(log);

        const events = new EventStream(res, this._options.streamFlushMs ?? 16);
        const send = (payload: unknown) => events.send(payload);
        let sentRole = false;
        let lastLogged = 0;
        try {
            const result = await this._options.backend.complete({
                history: input.history,
                systemPrompt: input.systemPrompt,
                temperature: body.temperature ?? defaults.temperature,
                maxTokens: input.maxTokens ?? defaults.maxTokens,
                seed: body.seed ?? undefined,
                topP: body.top_p ?? undefined,
                topK: body.top_k ?? undefined,
                minP: body.min_p ?? undefined,
                repeatPenalty: body.repeat_penalty ?? undefined,
                stop: stopList(body.stop),
                policy: log.policy,
                kvType: body.ponder?.cache_type_k,
                kvTypeV: body.ponder?.cache_type_v,
                flashAttention: body.ponder?.flash_attention,
                compareFull: body.ponder?.compare_full,
                budget: budget == null ? defaults.budget : "cells" in budget ? {kind: "cells", cells: budget.cells} : {kind: "mib", mib: budget.mib},
                signal: context.abort.signal,
                onStart: () => {
                    log.state = "running";
                    this._log(log);
                    if (stream)
                        events.open();
                },
                onChunk: (chunk) => {
                    if (chunk.segment === "thought")
                        log.thinkingTokens += chunk.tokens;
                    else
                        log.answerTokens += chunk.tokens;
                    log.firstTokenMs ??= this._now() - log.startedAt;
                    if (!stream || chunk.text === "")
                        return;
                    const field = chunk.segment === "thought" ? "reasoning_content" : "content";
                    if (kind === "chat") {
                        const delta = sentRole ? {[field]: chunk.text} : {role: "assistant", [field]: chunk.text};
                        sentRole = true;
                        send({id, object, created, model: model.id, choices: [{index: 0, delta, logprobs: null, finish_reason: null}]});
                    } else
                        send({id, object, created, model: model.id, choices: [{index: 0, text: field === "content" ? chunk.text : "", ...(field === "reasoning_content" ? {reasoning_content: chunk.text} : {}), logprobs: null, finish_reason: null}]});
                },
                onSample: (sample) => {
                    log.sample = sample;
                    const now = this._now();
                    if (now - lastLogged >= 250) {
                        lastLogged = now;
                        this._log(log);
                    }
                }
            });
            const usage = toUsage(result);
            // The log says what usage says (the engine's own counts, the thought's markers included).
            log.promptTokens = usage.prompt_tokens;
            log.thinkingTokens = usage.completion_tokens_details.reasoning_tokens;
            log.answerTokens = usage.completion_tokens - usage.completion_tokens_details.reasoning_tokens;
            log.budgetCells = result.budgetCells;
            log.sample = result.sample ?? log.sample;
            // Decode speed: the tokens after the first over the time after it (the prompt's evaluation is not decoding).
            const generated = result.thinkingTokens + result.answerTokens;
            const decodeMs = result.firstTokenMs != null ? result.generationMs - result.firstTokenMs : 0;
            log.tokensPerSecond = generated > 1 && decodeMs > 0 ? (generated - 1) / (decodeMs / 1000) : null;
            if (result.stopReason === "abort") {
                log.state = "aborted";
                log.httpStatus = 499;
                log.totalMs = this._now() - log.startedAt;
                this._log(log);
                events.flush();
                res.destroy();
                return;
            }
            const finish = finishReason(result.stopReason);
            const ponder = ponderStop(result);
            if (stream) {
                if (kind === "chat")
                    send({id, object, created, model: model.id, choices: [{index: 0, delta: sentRole ? {} : {role: "assistant", content: ""}, logprobs: null, finish_reason: finish}], ponder});
                else
                    send({id, object, created, model: model.id, choices: [{index: 0, text: "", logprobs: null, finish_reason: finish}], ponder});
                if (input.includeUsage)
                    send({id, object, created, model: model.id, choices: [], usage});
                events.end();
                log.httpStatus = 200;
            } else if (kind === "chat") {
                this._json(context, 200, {
                    id, object: "chat.completion", created, model: model.id,
                    choices: [{index: 0, message: {role: "assistant", content: result.text, reasoning_content: result.thinking, refusal: null}, logprobs: null, finish_reason: finish}],
                    usage, ponder
                });
            } else {
                this._json(context, 200, {
                    id, object: "text_completion", created, model: model.id,
                    choices: [{index: 0, text: result.text, reasoning_content: result.thinking, logprobs: null, finish_reason: finish}],
                    usage, ponder
                });
            }
            log.state = "done";
            log.totalMs = this._now() - log.startedAt;
            this._log(log);
        } catch (err) {
            if (err instanceof QueueAbortError) {
                log.state = "aborted";
                log.httpStatus = 499;
                log.totalMs = this._now() - log.startedAt;
                this._log(log);
                return;
            }
            const error = toApiError(err);
            if (res.headersSent) {
                // Mid-stream: the error travels as an event, as OpenAI's own streams report one.
                send({error: error.error});
                events.end();
                log.state = "error";
                log.httpStatus = error.status;
                log.error = error.error.message;
                log.totalMs = this._now() - log.startedAt;
                this._log(log);
                return;
            }
            this._fail(context, error);
        }
    }

    private _json(context: Context, status: number, payload: unknown): void {
        const body = JSON.stringify(payload);
        context.res.writeHead(status, {"content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(body)}).end(body);
        context.log.httpStatus = status;
    }

    private _fail(context: Context, error: ApiError): void {
        const {res, log} = context;
        if (!res.headersSent && !res.destroyed) {
            if (error.status === 401)
                res.setHeader("www-authenticate", "Bearer");
            this._json(context, error.status, {error: error.error});
        }
        log.state = "error";
        log.httpStatus = error.status;
        log.error = error.error.message;
        log.totalMs = this._now() - log.startedAt;
        this._log(log);
    }

    private _log(entry: ServerRequestLog): void {
        this._options.onLog?.({...entry});
    }
}

/**
 * The path a request target names, with repeated slashes merged and a trailing one dropped (`///v1/models/` is
 * `/v1/models`), or `null` for a target that is neither a path nor an http URL. Never throws.
 */
export function requestPath(target: string | undefined): string | null {
    let path: string;
    if (target == null || target === "")
        return null;
    if (target.startsWith("/"))
        path = target.replace(/[?#].*$/s, "");
    else if (/^https?:\/\//i.test(target)) {
        if (!URL.canParse(target))
            return null;
        path = new URL(target).pathname;
    } else
        return null;
    return path.replace(/\/{2,}/g, "/").replace(/(.)\/$/, "$1");
}

function describeClient(req: http.IncomingMessage): string {
    const agent = req.headers["user-agent"];
    const address = req.socket.remoteAddress ?? "unknown";
    return agent != null ? `${address} · ${agent.slice(0, 80)}` : address;
}
