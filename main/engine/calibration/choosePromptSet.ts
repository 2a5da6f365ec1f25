import path from "node:path";
import {modelFingerprint} from "../retention/modelFingerprint.js";
import type {PromptSet} from "./prompts.js";

/**
 * The calibration prompts a model reads: its own task's problems for a task model Ponder ships (the demo model, the same
 * file as `bundledModelPath`, or the merge model shipped beside it as `ponder-merge.gguf`; by content, wherever it was
 * copied: the app's "Try a sample problem" compares paths, which a copy would fail), questions it writes itself for any
 * other model (`jobPrompts`: Ponder's English prompts when it writes too few).
 */
export async function choosePromptSet(modelPath: string, bundledModelPath: string | null): Promise<PromptSet> {
    if (bundledModelPath == null) return "own";
    const [own, demo, merge] = await Promise.all([
        modelFingerprint(modelPath),
        modelFingerprint(bundledModelPath).catch(() => null),
        modelFingerprint(path.join(path.dirname(bundledModelPath), "ponder-merge.gguf")).catch(() => null)
    ]);
    return own === demo ? "demo" : own === merge ? "merge" : "own";
}
