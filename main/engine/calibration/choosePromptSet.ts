import {modelFingerprint} from "../retention/modelFingerprint.js";
import type {PromptSet} from "./prompts.js";

/**
 * The calibration prompts a model reads: its own task's problems for the demo model Ponder ships (the same file as
 * `bundledModelPath`, by content, wherever it was copied: the app's "Try a sample problem" compares paths, which a copy
 * would fail), Ponder's English prompts for any other model.
 */
export async function choosePromptSet(modelPath: string, bundledModelPath: string | null): Promise<PromptSet> {
    if (bundledModelPath == null)
        return "english";
    const bundled = await modelFingerprint(bundledModelPath).catch(() => null);
    return bundled != null && bundled === await modelFingerprint(modelPath) ? "demo" : "english";
}
