import {calibrateRetention} from "../calibration/calibrateRetention.js";
import type {CalibrateRequest, CalibrationResult} from "../EngineApi.js";
import type {SavedStates} from "../states/SavedStates.js";
import type {EngineContext} from "./EngineContext.js";
import type {LoadedModel, SetStatus} from "./engineState.js";

/** What the engine wording says while a calibration holds the engine. */
export const calibratingMessage = "Calibrating retention: answers wait until it ends";

/**
 * Runs the calibration job (calibrateRetention) on the loaded model, under the engine's lock (the caller holds it): the
 * state an answer left in the context is written first, and the chat context is disposed so the job's own context has
 * its memory (the next answer makes it again, reading its saved state). `null` when the job was cancelled (its work
 * folder stays, and the next calibration with the same settings goes on from it).
 */
export async function calibrateLoadedModel(
    engine: {loaded: LoadedModel; context: EngineContext; states: SavedStates; threads: number; setStatus: SetStatus},
    request: CalibrateRequest
): Promise<CalibrationResult | null> {
    const {signal, onProgress, modelPath, ...settings} = request;
    await engine.states.flush();
    await engine.context.dispose();
    engine.setStatus({message: calibratingMessage});
    try {
        return await calibrateRetention({...settings, model: engine.loaded.model, modelPath, threads: engine.threads, signal, onProgress});
    } catch (err) {
        if (signal.aborted) return null;
        throw err;
    } finally {
        engine.setStatus({message: null});
    }
}
