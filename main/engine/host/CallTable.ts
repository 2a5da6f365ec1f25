import {AppError} from "../../AppError.js";
import type {GenerateRequest, GenerationChunk, CalibrationJobProgress} from "../EngineApi.js";
import {engineWording} from "./engineWording.js";
import type {EngineCalls, EngineMethod, FromEngine, ToEngine} from "../protocol.js";

/** A call waiting for the engine process's answer. */
export type PendingCall = {
    resolve(value: unknown): void;
    reject(err: Error): void;
    /** The error a caller gets when the engine stops while this call runs. */
    stopped(reason: string): Error;
    /** Settles the call instead, when the proxy itself ended the engine for it (a stop the engine did not honour). */
    endedForIt?: () => void;
    onChunks?(chunks: GenerationChunk[]): void;
    onSample?: GenerateRequest["onSample"];
    onRebuild?: GenerateRequest["onRebuild"];
    onCalibration?(progress: CalibrationJobProgress): void;
};

/** The messages of the engine process that answer a call, or stream one's events. */
export type CallMessage = Extract<FromEngine, {type: "result" | "chunks" | "sample" | "rebuild" | "calibration"}>;

/** The child a call is posted to. */
type Poster = {post(message: ToEngine): void};

/**
 * The calls in flight to the engine process, by id: each posted once, answered once (its result, or its events while it
 * runs), and settled all together when the process stops.
 */
export class CallTable {
    private _nextId = 1;
    private readonly _pending = new Map<number, PendingCall>();

    /** A new call id. */
    nextId(): number {
        return this._nextId++;
    }

    /** Whether call `id` still waits. */
    has(id: number): boolean {
        return this._pending.has(id);
    }

    /** Whether an answer is being written (a generation waits). */
    get generating(): boolean {
        return [...this._pending.values()].some((call) => call.onChunks != null);
    }

    /** Waits for call `id` as `pending` says (a generation's own handling). */
    expect(id: number, pending: PendingCall): void {
        this._pending.set(id, pending);
    }

    /**
     * Posts a call to `child` and waits for its result. `stopped`: the error when the engine stops meanwhile. Defaults to
     * `ENGINE_STOPPED`, saying the engine restarts.
     */
    call<M extends EngineMethod>(
        child: Poster,
        method: M,
        args: EngineCalls[M]["args"],
        stopped?: (reason: string) => Error
    ): Promise<EngineCalls[M]["res"]> {
        const id = this.nextId();
        return new Promise((resolve, reject) => {
            this._pending.set(id, {
                resolve: resolve as (value: unknown) => void,
                reject,
                stopped: stopped ?? ((reason) => new AppError("ENGINE_STOPPED", engineWording.callStopped(reason)))
            });
            child.post({type: "call", id, method, args} as ToEngine);
        });
    }

    /** Hands a message of the engine process to the call it names. */
    route(message: CallMessage): void {
        switch (message.type) {
            case "result": {
                const pending = this._pending.get(message.id);
                this._pending.delete(message.id);
                if (message.ok) pending?.resolve(message.value);
                else pending?.reject(new AppError(message.error.code, message.error.message));
                return;
            }
            case "chunks":
                this._pending.get(message.id)?.onChunks?.(message.chunks);
                return;
            case "sample":
                this._pending.get(message.id)?.onSample?.(message.sample);
                return;
            case "rebuild":
                this._pending.get(message.id)?.onRebuild?.(message.progress, message.reason);
                return;
            case "calibration":
                this._pending.get(message.id)?.onCalibration?.(message.progress);
                return;
        }
    }

    /** Fails every call with `err` (the proxy ended the process on purpose). */
    rejectAll(err: Error): void {
        for (const call of this._takeAll()) call.reject(err);
    }

    /**
     * Settles every call of a process that stopped: with `ENGINE_STOPPED` after a shut-down; as ended for it, when the proxy
     * ended the process for that call (`killedBecause`); otherwise with the call's own error for `reason`.
     */
    settleStopped(reason: string, killedBecause: string | null, shutDown: boolean): void {
        for (const call of this._takeAll()) {
            if (shutDown) call.reject(new AppError("ENGINE_STOPPED", engineWording.shutDown));
            else if (killedBecause != null && call.endedForIt != null) call.endedForIt();
            else call.reject(call.stopped(reason));
        }
    }

    private _takeAll(): PendingCall[] {
        const calls = [...this._pending.values()];
        this._pending.clear();
        return calls;
    }
}
