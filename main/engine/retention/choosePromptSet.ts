import path from "node:path";
import {modelFingerprint} from "../retention/modelFingerprint.js";
import type {PromptSet} from "../calibration/prompts.js";

/**
 * The calibration prompts a model reads: its own task's problems for a task model Ponder ships (the demo model, the same
 * file as `bundledModelPath`, or the merge or many-task model shipped beside it as `ponder-merge.gguf` or
 * `ponder-multi.gguf`; by content, wherever it was copied: the app's "Try a sample problem" compares paths, which a copy
 * would fail), questions it writes itself for any other model (`jobPrompts`: Ponder's English prompts when it writes too
 * few). Runs in the main process: a file read, nothing native.
 */
export async function choosePromptSet(modelPath: string, bundledModelPath: string | null): Promise<PromptSet> {
    if (bundledModelPath == null) return "own";
    const beside = (name: string) => modelFingerprint(path.join(path.dirname(bundledModelPath), name)).catch(() => null);
    const [own, demo, merge, multi] = await Promise.all([
        modelFingerprint(modelPath),
        modelFingerprint(bundledModelPath).catch(() => null),
        beside("ponder-merge.gguf"),
        beside("ponder-multi.gguf")
    ]);
    return own === demo ? "demo" : own === merge ? "merge" : own === multi ? "multi" : "own";
}
