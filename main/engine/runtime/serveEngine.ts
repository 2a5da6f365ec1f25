import {toErrorInfo} from "../../toErrorInfo.js";
import type {EngineApi, GenerationChunk} from "../EngineApi.js";
import type {Channel, EngineFault, FromEngine, ToEngine} from "../protocol.js";

export type ServeEngineOptions = {
    /**
     * Milliseconds between a calibration's progress messages (a stage's first and last step, and each new estimate of
     * the time left, go at once). Defaults to `250`.
     */
    calibrationProgressMs?: number;
    /** Milliseconds a generation's chunks gather before they are sent together (the first goes at once). Defaults to `16`. */
    flushMs?: number;
    /** Carries out a fault a test asked for; faults are refused when absent. */
    injectFault?: (fault: EngineFault) => void;
    /** Called once `dispose` has been answered: the process may end. */
    onDisposed?: () => void;
};

/**
 * The engine process's side of the protocol: runs each call on `engine` and answers it, forwards the status, and
 * streams a generation's chunks in batches (one message per `flushMs`, not one per token).
 */
export function serveEngine(channel: Channel<FromEngine, ToEngine>, engine: EngineApi, options: ServeEngineOptions = {}): void {
    const flushMs = options.flushMs ?? 16;
    const aborts = new Map<number, AbortController>();
    const send = (message: FromEngine) => channel.post(message);
    const answer = (id: number, work: () => Promise<unknown>, then?: () => void) => {
        work()
            .then(
                (value) => send({type: "result", id, ok: true, value: value ?? null}),
                (err: unknown) => send({type: "result", id, ok: false, error: toErrorInfo(err)})
            )
            .finally(then);
    };

    engine.onStatus((status) => send({type: "status", status, inspection: engine.inspection}));
    engine.onStateSettled((save) => send({type: "stateSettled", save}));

    channel.onMessage((message) => {
        switch (message.type) {
            case "call":
                answer(message.id, () => call(engine, message), message.method === "dispose" ? options.onDisposed : undefined);
                return;
            case "abort":
                aborts.get(message.id)?.abort();
                return;
            case "fault":
                options.injectFault?.(message.fault);
                return;
            case "calibrate": {
                const {id, request} = message;
                const abort = new AbortController();
                aborts.set(id, abort);
                const everyMs = options.calibrationProgressMs ?? 250;
                let last = {stage: "", at: -Infinity};
                answer(id, () =>
                    engine
                        .calibrateRetention({
                            ...request,
                            signal: abort.signal,
                            onProgress(progress) {
                                const now = performance.now();
                                // a new estimate of the time left always goes (the steps within a prompt have none)
                                if (
                                    progress.stage === last.stage &&
                                    progress.done < progress.total &&
                                    progress.remaining == null &&
                                    now - last.at < everyMs
                                )
                                    return;
                                last = {stage: progress.stage, at: now};
                                send({type: "calibration", id, progress});
                            }
                        })
                        .finally(() => aborts.delete(id))
                );
                return;
            }
            case "generate": {
                const {id, request} = message;
                const abort = new AbortController();
                aborts.set(id, abort);
                let pending: GenerationChunk[] = [];
                let timer: NodeJS.Timeout | null = null;
                // The first chunk goes at once: batching must not delay the time to the first token.
                let sentAny = false;
                const flush = () => {
                    if (timer != null) clearTimeout(timer);
                    timer = null;
                    if (pending.length > 0) send({type: "chunks", id, chunks: pending});
                    pending = [];
                };
                answer(id, async () => {
                    try {
                        const {samples, rebuild, ...rest} = request;
                        return await engine.generate({
                            ...rest,
                            signal: abort.signal,
                            onChunk(chunk) {
                                const last = pending.at(-1);
                                if (last != null && last.segment === chunk.segment)
                                    pending[pending.length - 1] = {
                                        segment: last.segment,
                                        text: last.text + chunk.text,
                                        tokens: last.tokens + chunk.tokens
                                    };
                                else pending.push(chunk);
                                if (!sentAny) {
                                    sentAny = true;
                                    flush();
                                } else timer ??= setTimeout(flush, flushMs);
                            },
                            onSample: samples
                                ? (sample) => {
                                      flush();
                                      send({type: "sample", id, sample});
                                  }
                                : undefined,
                            onRebuild: rebuild ? (progress, reason) => send({type: "rebuild", id, progress, reason}) : undefined
                        });
                    } finally {
                        flush();
                        aborts.delete(id);
                    }
                });
                return;
            }
        }
    });
    send({type: "ready", pid: process.pid});
}

function call(engine: EngineApi, message: Extract<ToEngine, {type: "call"}>): Promise<unknown> {
    switch (message.method) {
        case "start":
            return engine.start();
        case "freeMemory":
            return engine.freeMemory();
        case "inspect":
            return engine.inspect(...message.args);
        case "loadModel":
            return engine.loadModel(...message.args);
        case "countTokens":
            return engine.countTokens(...message.args);
        case "saveState":
            return engine.saveState(...message.args);
        case "dispose":
            return engine.dispose();
    }
}
