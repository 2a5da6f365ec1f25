import {AppError} from "../AppError.js";

type Waiter = {grant: () => void};

/** Thrown by `GenerationQueue.acquire` when the caller's signal aborts while it waits for its turn. */
export class QueueAbortError extends Error {
    override name = "QueueAbortError";

    constructor() {
        super("Stopped before its turn came");
    }
}

/**
 * One generation at a time over the one engine, shared by the app's chat and the API server: a caller waits
 * for its turn in a bounded first-in, first-out queue, and a full queue is refused at once with `BUSY`.
 */
export class GenerationQueue {
    private _running = false;
    private readonly _waiting: Waiter[] = [];

    /** @param _maxWaiting Callers that may wait while one generation runs. */
    constructor(private _maxWaiting: number) {}

    /** Whether a generation is running now. */
    get running(): boolean {
        return this._running;
    }

    /** Callers waiting for their turn. */
    get waiting(): number {
        return this._waiting.length;
    }

    /** Whether a new caller would be refused. */
    get full(): boolean {
        return this._running && this._waiting.length >= this._maxWaiting;
    }

    set maxWaiting(value: number) {
        this._maxWaiting = value;
    }

    /**
     * Waits for the engine and returns the function that hands it back (call it exactly once, when done).
     * Throws `BUSY` when the queue is full, and `QueueAbortError` when `signal` aborts before the turn came.
     */
    async acquire(signal?: AbortSignal): Promise<() => void> {
        if (signal?.aborted) throw new QueueAbortError();
        if (!this._running) {
            this._running = true;
            return this._releaser();
        }
        if (this._waiting.length >= this._maxWaiting)
            throw new AppError(
                "BUSY",
                `The engine is busy: one generation runs and ${this._waiting.length} wait, the most the queue holds`
            );

        await new Promise<void>((resolve, reject) => {
            const waiter: Waiter = {
                grant: () => {
                    signal?.removeEventListener("abort", onAbort);
                    resolve();
                }
            };
            const onAbort = () => {
                const index = this._waiting.indexOf(waiter);
                if (index >= 0) this._waiting.splice(index, 1);
                reject(new QueueAbortError());
            };
            signal?.addEventListener("abort", onAbort, {once: true});
            this._waiting.push(waiter);
        });
        return this._releaser();
    }

    /** Runs `task` in its turn. */
    async run<T>(task: () => Promise<T>, signal?: AbortSignal): Promise<T> {
        const release = await this.acquire(signal);
        try {
            return await task();
        } finally {
            release();
        }
    }

    private _releaser(): () => void {
        let released = false;
        return () => {
            if (released) return;
            released = true;
            const next = this._waiting.shift();
            if (next != null)
                next.grant(); // the turn passes on without the engine going idle in between
            else this._running = false;
        };
    }
}
