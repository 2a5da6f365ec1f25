import type {CompressionSettings} from "../../preload/contract.js";
import {AppError} from "../AppError.js";
import type {EngineApi, GenerateRequest, GenerationResult} from "../engine/EngineApi.js";
import type {ResolvedKv} from "../kv/resolveKv.js";
import type {CompressionService} from "./CompressionService.js";
import {QueueAbortError, type GenerationQueue} from "./GenerationQueue.js";

export type GenerationJob = {
    /** Stops the wait for the engine's turn: the run then throws `QueueAbortError`. */
    signal: AbortSignal;
    /**
     * The KV settings: compression settings resolved once the turn comes (`CompressionService.resolve`, with the free
     * memory of that moment), or a value resolved before queuing (a request refused early when its budget does not fit).
     */
    kv: {resolve: CompressionSettings} | {resolved: ResolvedKv};
    /** Called once the turn has come, with the resolved settings: the rest of the engine's request. */
    request(kv: ResolvedKv): Omit<GenerateRequest, "kv">;
};

/** How a chat answer ended when its generation threw: what its message's status and error become. */
export type GenerationFailure = {status: "stopped" | "interrupted" | "error"; error: string | null};

/**
 * One generation at the engine, as the chat and the API server run it: waits for its turn in the queue the two share,
 * resolves its KV settings once, runs the engine with them, and gives the turn back however it ends.
 */
export class GenerationRunner {
    constructor(
        private readonly _engine: EngineApi,
        private readonly _queue: GenerationQueue,
        private readonly _compression: Pick<CompressionService, "resolve">
    ) {}

    async run(job: GenerationJob): Promise<{kv: ResolvedKv; result: GenerationResult}> {
        const release = await this._queue.acquire(job.signal);
        try {
            const kv = "resolved" in job.kv ? job.kv.resolved : await this._compression.resolve(job.kv.resolve);
            const result = await this._engine.generate({...job.request(kv), kv: {compression: kv.compression, cells: kv.cells}});
            return {kv, result};
        } finally {
            release();
        }
    }
}

/**
 * What a failed generation means for its answer: stopped before its turn came, interrupted by the engine process dying
 * under it (what arrived is kept, and Continue resumes it), or an error with its message.
 */
export function generationFailure(err: unknown): GenerationFailure {
    if (err instanceof QueueAbortError) return {status: "stopped", error: null};
    if (err instanceof AppError && err.code === "ENGINE_STOPPED") return {status: "interrupted", error: err.message};
    return {status: "error", error: (err as Error).message};
}
