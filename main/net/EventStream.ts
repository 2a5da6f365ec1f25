import type http from "node:http";

/**
 * Server-sent events on a response. Events are written as they come but reach the socket together every
 * `flushMs`: one write (and one wake-up of the client) per token would cost the engine's decode speed on a
 * busy machine. The first event goes at once, so the time to the first token is not delayed.
 */
export class EventStream {
    private _timer: NodeJS.Timeout | null = null;
    private _sentAny = false;

    constructor(
        private readonly _res: http.ServerResponse,
        private readonly _flushMs: number
    ) {}

    /** Sends the status and headers of an event stream. */
    open(): void {
        this._res.writeHead(200, {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache",
            "x-accel-buffering": "no"
        });
        this._res.flushHeaders();
    }

    send(payload: unknown): void {
        if (this._sentAny && this._timer == null && this._flushMs > 0) {
            this._res.cork();
            this._timer = setTimeout(() => this.flush(), this._flushMs);
        }
        this._sentAny = true;
        this._res.write(`data: ${JSON.stringify(payload)}\n\n`);
    }

    /** Writes what is held back now. */
    flush(): void {
        if (this._timer != null) {
            clearTimeout(this._timer);
            this._timer = null;
            this._res.uncork();
        }
    }

    /** Ends the stream as OpenAI's do. */
    end(): void {
        this.flush();
        this._res.end("data: [DONE]\n\n");
    }
}
