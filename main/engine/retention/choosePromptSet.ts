import path from "node:path";
import {modelFingerprint} from "../retention/modelFingerprint.js";
import type {PromptSet} from "../calibration/prompts.js";

/** The task models Ponder ships in resources/models, by file name, and the prompt set of each one's task. */
const SHIPPED_TASKS: readonly [file: string, task: PromptSet][] = [
    ["ponder-demo.gguf", "demo"],
    ["ponder-merge.gguf", "merge"],
    ["ponder-multi.gguf", "multi"]
];

/**
 * The calibration prompts a model reads: its own task's problems for a task model Ponder ships (a file of
 * resources/models, the folder of `bundledModelPath`, the model a fresh install loads; by content, wherever it was
 * copied: the app's "Try a sample problem" compares paths, which a copy would fail), questions it writes itself for any
 * other model (`jobPrompts`: Ponder's English prompts when it writes too few). Runs in the main process: a file read,
 * nothing native.
 */
export async function choosePromptSet(modelPath: string, bundledModelPath: string | null): Promise<PromptSet> {
    if (bundledModelPath == null) return "own";
    const folder = path.dirname(bundledModelPath);
    const [own, ...shipped] = await Promise.all([
        modelFingerprint(modelPath),
        ...SHIPPED_TASKS.map(([file]) => modelFingerprint(path.join(folder, file)).catch(() => null))
    ]);
    const index = shipped.findIndex((fingerprint) => fingerprint === own);
    return index >= 0 ? SHIPPED_TASKS[index]![1] : "own";
}
