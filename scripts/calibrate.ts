// `npm run calibrate`: TRIM-KV retention gates for a GGUF model from its own thinking (issue 36), headless.
//
//   npm run calibrate -- --model <file.gguf> [--prompts N] [--tokens N] [--seed S] [--out path] [--validation N]
//                        [--max-tokens N] [--hidden N] [--epochs N] [--read-thresholds 0.5,0.25] [--horizon-weights 1,0.5] [--work-dir dir] [--threads N] [--prompt-set own|demo|merge|english]
//                        [--prompts-file prompts.jsonl|prompts.txt]
//
// --prompts-file: a person's own prompts instead of the model's questions (JSON Lines, a string or {"prompt": "..."}
// per line, or plain text, a prompt per line); the last --validation of them are held out for the validation.
//
// Progress lines go to stderr, the result (JSON) to stdout. Exit status 0: the gates were written; 2: they did worse
// than Lethe on the held-out prompts and were not installed (nothing changed beside the model; the model's thinking
// stays in the work folder, and a command that changes only --hidden, --epochs or --horizon-weights goes on from it);
// 1: an error; 130: cancelled (Ctrl-C), and the same command goes on from the last prompt thought.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {parseArgs} from "node:util";
import {calibrateRetention, type CalibrationJobProgress} from "../main/engine/calibration/calibrateRetention.js";
import {choosePromptSet} from "../main/engine/calibration/choosePromptSet.js";
import type {PromptSet} from "../main/engine/calibration/prompts.js";
import {parsePromptsFile} from "../main/engine/calibration/promptsFile.js";
import {loadPatchedLlama} from "../main/engine/native/loadPatchedLlama.js";
import {describeCalibrationResult} from "../renderer/lib/describeCalibration.js";

const {values} = parseArgs({
    options: {
        model: {type: "string"},
        prompts: {type: "string"},
        tokens: {type: "string"},
        seed: {type: "string"},
        out: {type: "string"},
        validation: {type: "string"},
        "max-tokens": {type: "string"},
        hidden: {type: "string"},
        epochs: {type: "string"},
        "read-thresholds": {type: "string"},
        "horizon-weights": {type: "string"},
        "work-dir": {type: "string", default: path.join(os.homedir(), ".cache", "ponder", "calibration")},
        threads: {type: "string", default: String(Math.min(4, os.availableParallelism()))},
        "prompt-set": {type: "string"},
        "prompts-file": {type: "string"}
    }
});

function number(name: string, value: string | undefined): number | undefined {
    if (value == null) return undefined;
    const parsed = Number(value);
    if (!Number.isInteger(parsed) || parsed < 0) {
        console.error(`error: --${name} must be a whole number, not ${value}`);
        process.exit(1);
    }
    return parsed;
}

function weights(name: string, value: string | undefined): number[] | undefined {
    if (value == null) return undefined;
    const parsed = value.split(",").map(Number);
    if (parsed.some((v) => !(v >= 0 && v <= 4))) {
        console.error(`error: --${name} takes numbers from 0 to 4, separated by commas, not ${value}`);
        process.exit(1);
    }
    return parsed;
}

function shares(name: string, value: string | undefined): number[] | undefined {
    if (value == null) return undefined;
    const parsed = value.split(",").map(Number);
    if (parsed.some((v) => !(v > 0 && v <= 1))) {
        console.error(`error: --${name} takes shares above 0 and at most 1, separated by commas, not ${value}`);
        process.exit(1);
    }
    return parsed;
}

if (values.model == null) {
    console.error("error: --model <file.gguf> is required");
    process.exit(1);
}
const modelPath = path.resolve(values.model);
const bundled = path.resolve(import.meta.dirname, "../resources/models/ponder-demo.gguf");
if (values["prompts-file"] != null && values["prompt-set"] != null) {
    console.error("error: --prompts-file and --prompt-set name the prompts twice: give one");
    process.exit(1);
}
const promptList = values["prompts-file"] == null ? undefined : await readPromptsFile(path.resolve(values["prompts-file"]));
const promptSet = (promptList != null ? "file" : (values["prompt-set"] ?? (await choosePromptSet(modelPath, bundled)))) as PromptSet;
if (promptSet !== "demo" && promptSet !== "merge" && promptSet !== "english" && promptSet !== "own" && promptSet !== "file") {
    console.error("error: --prompt-set is own, demo, merge or english");
    process.exit(1);
}

async function readPromptsFile(file: string): Promise<string[]> {
    try {
        return parsePromptsFile(await fs.readFile(file, "utf8"));
    } catch (err) {
        console.error(`error: --prompts-file ${file}: ${(err as Error).message}`);
        process.exit(1);
    }
}
const controller = new AbortController();
process.on("SIGINT", () => controller.abort(new Error("cancelled")));

const minutes = (s: number) => (s >= 90 ? `${(s / 60).toFixed(1)} min` : `${Math.round(s)} s`);
let lastLine = 0;
function onProgress(p: CalibrationJobProgress): void {
    const now = performance.now();
    if (now - lastLine < 1000 && p.done < p.total) return;
    lastLine = now;
    const done = p.stage === "thinking" ? p.done.toFixed(1) : String(p.done);
    console.error(
        `${p.stage} ${done}/${p.total}` +
            (p.resumed > 0 ? ` (${p.resumed} resumed)` : "") +
            ` | ${p.tokensSeen} tokens | ${minutes(p.elapsed)}` +
            (p.remaining != null ? `, about ${minutes(p.remaining)} left` : "")
    );
}

const llama = await loadPatchedLlama({gpu: "auto", logLevel: "error"});
const model = await llama.loadModel({modelPath});
try {
    console.error(
        `calibrating ${path.basename(modelPath)} on ${{english: "Ponder's English prompts", own: "questions it writes itself", demo: "the demo task's training problems", merge: "the merge task's training problems", file: `the ${promptList?.length ?? 0} prompts of ${values["prompts-file"]}`}[promptSet]}`
    );
    const result = await calibrateRetention({
        model,
        modelPath,
        promptSet,
        promptList,
        prompts: number("prompts", values.prompts),
        tokens: number("tokens", values.tokens),
        seed: number("seed", values.seed),
        out: values.out != null ? path.resolve(values.out) : undefined,
        validationPrompts: number("validation", values.validation),
        maxTokens: number("max-tokens", values["max-tokens"]),
        hidden: number("hidden", values.hidden),
        epochs: number("epochs", values.epochs),
        readThresholds: shares("read-thresholds", values["read-thresholds"]),
        horizonWeights: weights("horizon-weights", values["horizon-weights"]),
        workDir: path.resolve(values["work-dir"]),
        keepRefusedWork: true,
        threads: Number(values.threads),
        signal: controller.signal,
        onProgress,
        onLog: (line) => console.error(line)
    });
    // the card the app shows for the result
    const card = describeCalibrationResult({
        promptSet,
        prompts: result.prompts,
        tokens: result.tokensSeen,
        samples: result.samples,
        seconds: result.seconds,
        date: new Date().toISOString(),
        validation: result.validation
    });
    console.error(
        result.installed
            ? `${card}\nwrote ${result.out}${result.backup != null ? ` (the earlier gates are in ${result.backup})` : ""}`
            : `${card}\n${result.refusal}` +
                  (result.workKept == null
                      ? ""
                      : `\nthe model's thinking on the ${result.prompts} prompts is kept in ${result.workKept}: the same command with other --hidden, --epochs or --horizon-weights goes on from it without thinking again`)
    );
    console.log(JSON.stringify(result));
    process.exitCode = result.installed ? 0 : 2;
} catch (err) {
    if (controller.signal.aborted) {
        console.error("cancelled: the prompts thought so far are kept; the same command goes on from there");
        process.exitCode = 130;
    } else {
        console.error(`error: ${(err as Error).message}`);
        process.exitCode = 1;
    }
} finally {
    await model.dispose();
    await llama.dispose();
}
