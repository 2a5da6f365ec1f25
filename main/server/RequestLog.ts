import {randomUUID} from "node:crypto";
import type http from "node:http";
import type {KvSample, PolicyId, ServerRequestLog} from "../../preload/contract.js";
import type {GenerationChunk} from "../engine/EngineApi.js";
import type {Usage} from "./openaiWire.js";
import type {CompletionResult} from "./types.js";

/** How a request ended: served, failed, or aborted (its client left). */
type Ending = {state: "done"} | {state: "aborted"} | {state: "error"; httpStatus: number; error: string};

/**
 * One request's entry in the server's log, told to `onLog` whenever it changes: queued, running (its memory readings at
 * most every 250 ms), then closed once, by `close`, with its status and its time.
 */
export class RequestLog {
    readonly entry: ServerRequestLog;
    private _lastSample = 0;

    constructor(
        req: http.IncomingMessage,
        pathname: string | null,
        private readonly _now: () => number,
        private readonly _onLog: ((entry: ServerRequestLog) => void) | undefined
    ) {
        this.entry = {
            id: randomUUID(),
            startedAt: _now(),
            client: describeClient(req),
            method: req.method ?? "GET",
            path: pathname ?? String(req.url).slice(0, 200),
            state: "running",
            httpStatus: null,
            stream: false,
            promptTokens: 0,
            thinkingTokens: 0,
            answerTokens: 0,
            tokensPerSecond: null,
            firstTokenMs: null,
            totalMs: null,
            policy: null,
            budgetCells: null,
            sample: null,
            error: null
        };
    }

    /** A generation waits for its turn. */
    queued(stream: boolean, policy: PolicyId): void {
        this.entry.stream = stream;
        this.entry.state = "queued";
        this.entry.policy = policy;
        this._tell();
    }

    /** Its turn came. */
    running(): void {
        this.entry.state = "running";
        this._tell();
    }

    /** Counts a chunk's tokens, and the time to the first. */
    chunk(chunk: GenerationChunk): void {
        if (chunk.segment === "thought") this.entry.thinkingTokens += chunk.tokens;
        else this.entry.answerTokens += chunk.tokens;
        this.entry.firstTokenMs ??= this._now() - this.entry.startedAt;
    }

    /** A memory reading, told at most every 250 ms. */
    sample(sample: KvSample): void {
        // What the rounds recorded of each token is for the chat's memory panel, not the log.
        const {tokens: _tokens, rounds: _rounds, ...reading} = sample;
        this.entry.sample = reading;
        const now = this._now();
        if (now - this._lastSample >= 250) {
            this._lastSample = now;
            this._tell();
        }
    }

    /** The generation's figures: what usage says (the engine's own counts, the thought's markers included), and its speed. */
    result(result: CompletionResult, usage: Usage): void {
        const entry = this.entry;
        entry.promptTokens = usage.prompt_tokens;
        entry.thinkingTokens = usage.completion_tokens_details.reasoning_tokens;
        entry.answerTokens = usage.completion_tokens - usage.completion_tokens_details.reasoning_tokens;
        entry.budgetCells = result.budgetCells;
        entry.sample = result.sample ?? entry.sample;
        // Decode speed: the tokens after the first over the time after it (the prompt's evaluation is not decoding).
        const generated = result.thinkingTokens + result.answerTokens;
        const decodeMs = result.firstTokenMs != null ? result.generationMs - result.firstTokenMs : 0;
        entry.tokensPerSecond = generated > 1 && decodeMs > 0 ? (generated - 1) / (decodeMs / 1000) : null;
    }

    /** Ends the entry: served (200), aborted (499: the client left) or failed with its status and message. */
    close(ending: Ending): void {
        const entry = this.entry;
        entry.state = ending.state;
        if (ending.state === "error") {
            entry.httpStatus = ending.httpStatus;
            entry.error = ending.error;
        } else entry.httpStatus = ending.state === "done" ? 200 : 499;
        entry.totalMs = this._now() - entry.startedAt;
        this._tell();
    }

    private _tell(): void {
        this._onLog?.({...this.entry});
    }
}

function describeClient(req: http.IncomingMessage): string {
    const agent = req.headers["user-agent"];
    const address = req.socket.remoteAddress ?? "unknown";
    return agent != null ? `${address} · ${agent.slice(0, 80)}` : address;
}
