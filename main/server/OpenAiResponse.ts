import type http from "node:http";
import type {GenerationChunk} from "../engine/EngineApi.js";
import {EventStream} from "../net/EventStream.js";
import {writeJson} from "../net/writeJson.js";
import type {OpenAiRequest} from "./openaiRequest.js";
import {finishReason, ponderStop, type ApiError, type Usage} from "./openaiWire.js";
import type {CompletionResult} from "./types.js";

export type OpenAiResponseOptions = {
    /** The id of the request's log entry, which the completion's id carries. */
    logId: string;
    /** The model served, as clients name it. */
    model: string;
    /** Seconds since the epoch. */
    created: number;
    /** Streamed events written within this many milliseconds reach the socket together. */
    flushMs: number;
};

/**
 * One request's answer in OpenAI's wire format: a chat completion or a text completion, streamed as server-sent events
 * (a chunk per piece of text, the thought as `reasoning_content`) or sent whole, with OpenAI's finish reason and Ponder's
 * own (`ponder`).
 */
export class OpenAiResponse {
    private readonly _events: EventStream;
    private readonly _stream: boolean;
    private readonly _head: {id: string; object: string; created: number; model: string};
    private _sentRole = false;

    constructor(
        private readonly _res: http.ServerResponse,
        private readonly _request: OpenAiRequest,
        options: OpenAiResponseOptions
    ) {
        this._events = new EventStream(_res, options.flushMs);
        this._stream = _request.body.stream === true;
        const chat = _request.kind === "chat";
        this._head = {
            id: `${chat ? "chatcmpl" : "cmpl"}-${options.logId}`,
            object: chat ? "chat.completion.chunk" : "text_completion",
            created: options.created,
            model: options.model
        };
    }

    get stream(): boolean {
        return this._stream;
    }

    /** Sends the event stream's status and headers (a streamed request, once its turn came). */
    open(): void {
        if (this._stream) this._events.open();
    }

    /** Streams a chunk of text (a streamed request; one sent whole gets it at the end). */
    chunk(chunk: GenerationChunk): void {
        if (!this._stream || chunk.text === "") return;
        const field = chunk.segment === "thought" ? "reasoning_content" : "content";
        if (this._request.kind === "chat") {
            const delta = this._sentRole ? {[field]: chunk.text} : {role: "assistant", [field]: chunk.text};
            this._sentRole = true;
            this._events.send({...this._head, choices: [{index: 0, delta, logprobs: null, finish_reason: null}]});
        } else {
            const text = field === "content" ? chunk.text : "";
            const reasoning = field === "reasoning_content" ? {reasoning_content: chunk.text} : {};
            this._events.send({...this._head, choices: [{index: 0, text, ...reasoning, logprobs: null, finish_reason: null}]});
        }
    }

    /** Answers with the result: the stream's last chunk, the usage when asked, and its end; or the whole completion. */
    finish(result: CompletionResult, usage: Usage): void {
        const finish = finishReason(result.stopReason);
        const ponder = ponderStop(result);
        const {id, created, model} = this._head;
        if (this._stream) {
            if (this._request.kind === "chat")
                this._events.send({
                    ...this._head,
                    choices: [
                        {index: 0, delta: this._sentRole ? {} : {role: "assistant", content: ""}, logprobs: null, finish_reason: finish}
                    ],
                    ponder
                });
            else this._events.send({...this._head, choices: [{index: 0, text: "", logprobs: null, finish_reason: finish}], ponder});
            if (this._request.includeUsage) this._events.send({...this._head, choices: [], usage});
            this._events.end();
        } else if (this._request.kind === "chat") {
            writeJson(this._res, 200, {
                id,
                object: "chat.completion",
                created,
                model,
                choices: [
                    {
                        index: 0,
                        message: {role: "assistant", content: result.text, reasoning_content: result.thinking, refusal: null},
                        logprobs: null,
                        finish_reason: finish
                    }
                ],
                usage,
                ponder
            });
        } else {
            writeJson(this._res, 200, {
                id,
                object: "text_completion",
                created,
                model,
                choices: [{index: 0, text: result.text, reasoning_content: result.thinking, logprobs: null, finish_reason: finish}],
                usage,
                ponder
            });
        }
    }

    /** Ends a stream already started with the error as an event, as OpenAI's own streams report one. */
    failMidStream(error: ApiError): void {
        this._events.send({error: error.error});
        this._events.end();
    }

    /** The client left: what is held back is written, and the connection ends. */
    abandon(): void {
        this._events.flush();
        this._res.destroy();
    }
}
