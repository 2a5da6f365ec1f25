// `npm run calibrate`: TRIM-KV retention gates for a GGUF model from its own thinking, headless.
//
//   npm run calibrate -- --model <file.gguf> [--prompts N] [--tokens N] [--seed S] [--out path] [--validation N]
//                        [--max-tokens N] [--hidden N] [--epochs N] [--read-thresholds 0.5,0.25] [--horizon-weights 1,0.5] [--work-dir dir] [--threads N] [--prompt-set own|demo|merge|multi|english]
//                        [--prompts-file prompts.jsonl|prompts.txt] [--traces traces.jsonl] [--conversations <data dir>] [--draws N] [--keep-work]
//
// --prompts-file: a person's own prompts instead of the model's questions (JSON Lines, a string or {"prompt": "..."}
// per line, or plain text, a prompt per line); the last --validation of them are held out for the validation.
// --traces: texts already written, read at prompt speed instead of written (JSON Lines: {"prompt", "response"} with
// the thought inside <think>...</think> or in "reasoning_content", or {"messages": [...]} in the chat format); the last
// --validation held out. Another model's texts are another distribution than this model's own.
// --conversations: the model's own conversations stored in a Ponder data directory (the app's, or `npm run headless --
// --data-dir`'s; the app must not be running on it), read the same way.
// --draws: with the model's own questions, another draw of them (the next seed) after a refusal, up to N draws in all.
// --keep-work: keep the model's thinking in the work folder after gates are installed too (it is kept after a refusal),
// so a command that changes only --hidden, --epochs or --horizon-weights goes on from it.
//
// Progress lines go to stderr, the result (JSON) to stdout. Exit status 0: the gates were written; 2: they did worse
// than Lethe on the held-out prompts and were not installed (nothing changed beside the model; the model's thinking
// stays in the work folder, and a command that changes only --hidden, --epochs or --horizon-weights goes on from it);
// 1: an error (a bad option, a model file that is missing or not GGUF: one line, before anything loads); 130: cancelled
// (Ctrl-C), and the same command goes on from the last prompt thought.
import {existsSync} from "node:fs";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {parseArgs} from "node:util";
import {calibrateRetention} from "../main/engine/calibration/calibrateRetention.js";
import {checkGgufHeader} from "../main/engine/gguf/checkGgufHeader.js";
import {choosePromptSet} from "../main/engine/retention/choosePromptSet.js";
import type {PromptSet} from "../main/engine/calibration/prompts.js";
import {parsePromptsFile} from "../main/engine/calibration/promptsFile.js";
import {parseTraceFile, type WrittenText} from "../main/engine/calibration/writtenTexts.js";
import {AppDatabase} from "../main/db/AppDatabase.js";
import {DataDirLock, DataDirLockedError} from "../main/DataDirLock.js";
import {conversationTexts, minimumConversations} from "../main/services/conversationTexts.js";
import {loadPatchedLlama} from "../main/engine/native/loadPatchedLlama.js";
import {describeCalibrationResult} from "../renderer/lib/describeCalibration.js";
import type {CalibrationJobProgress} from "../main/engine/calibration/types.js";

function fail(message: string): never {
    console.error(`error: ${message}`);
    process.exit(1);
}

let values;
try {
    values = parseArgs({
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
            "prompts-file": {type: "string"},
            traces: {type: "string"},
            conversations: {type: "string"},
            draws: {type: "string"},
            "keep-work": {type: "boolean", default: false}
        }
    }).values;
} catch (err) {
    fail((err as Error).message.split("\n")[0]!);
}

function number(name: string, value: string | undefined, min = 0): number | undefined {
    if (value == null) return undefined;
    const parsed = value.trim() === "" ? NaN : Number(value);
    if (!Number.isInteger(parsed) || parsed < min) fail(`--${name} must be a whole number${min > 0 ? ` from ${min}` : ""}, not ${value}`);
    return parsed;
}

function weights(name: string, value: string | undefined): number[] | undefined {
    if (value == null) return undefined;
    const parsed = value.split(",").map(Number);
    if (parsed.some((v) => !(v >= 0 && v <= 4))) fail(`--${name} takes numbers from 0 to 4, separated by commas, not ${value}`);
    return parsed;
}

function shares(name: string, value: string | undefined): number[] | undefined {
    if (value == null) return undefined;
    const parsed = value.split(",").map(Number);
    if (parsed.some((v) => !(v > 0 && v <= 1))) fail(`--${name} takes shares above 0 and at most 1, separated by commas, not ${value}`);
    return parsed;
}

// Every option is read, and the model checked as the app checks a GGUF file, before anything loads.
if (values.model == null) fail("--model <file.gguf> is required");
const options = {
    prompts: number("prompts", values.prompts),
    tokens: number("tokens", values.tokens),
    seed: number("seed", values.seed),
    validationPrompts: number("validation", values.validation),
    maxTokens: number("max-tokens", values["max-tokens"]),
    hidden: number("hidden", values.hidden),
    epochs: number("epochs", values.epochs),
    readThresholds: shares("read-thresholds", values["read-thresholds"]),
    horizonWeights: weights("horizon-weights", values["horizon-weights"]),
    threads: number("threads", values.threads, 1)!
};
const modelPath = path.resolve(values.model);
try {
    await checkGgufHeader(modelPath);
} catch (err) {
    fail(`--model: ${(err as Error).message}`);
}
const bundled = path.resolve(import.meta.dirname, "../resources/models/ponder-demo.gguf");
const sources = (["prompts-file", "prompt-set", "traces", "conversations"] as const).filter((name) => values[name] != null);
if (sources.length > 1) fail(`${sources.map((name) => `--${name}`).join(" and ")} name the prompts twice: give one`);
const draws = number("draws", values.draws, 1) ?? 1;
if (values["prompt-set"] != null && !["own", "demo", "merge", "multi", "english"].includes(values["prompt-set"]))
    fail("--prompt-set is own, demo, merge, multi or english");
const promptList = values["prompts-file"] == null ? undefined : await readPromptsFile(path.resolve(values["prompts-file"]));
const texts =
    values.traces != null
        ? await readTraces(path.resolve(values.traces))
        : values.conversations != null
          ? readConversations(path.resolve(values.conversations))
          : undefined;
const promptSet = (
    promptList != null
        ? "file"
        : values.traces != null
          ? "traces"
          : values.conversations != null
            ? "conversations"
            : (values["prompt-set"] ?? (await choosePromptSet(modelPath, bundled)))
) as PromptSet;

async function readTraces(file: string): Promise<WrittenText[]> {
    try {
        return parseTraceFile(await fs.readFile(file, "utf8"));
    } catch (err) {
        fail(`--traces ${file}: ${(err as Error).message}`);
    }
}

/** The model's own conversations in a data directory, with the directory held as the app holds it (one user at a time). */
function readConversations(dataDir: string): WrittenText[] {
    const file = path.join(dataDir, "ponder.sqlite");
    if (!existsSync(file)) fail(`--conversations ${dataDir}: no Ponder data there (no ponder.sqlite)`);
    let lock: DataDirLock;
    try {
        lock = DataDirLock.acquire(dataDir);
    } catch (err) {
        if (err instanceof DataDirLockedError)
            fail(`--conversations ${dataDir}: ${err.message}: close Ponder first, or calibrate from the app`);
        throw err;
    }
    try {
        const db = new AppDatabase(file);
        try {
            const found = conversationTexts(db, modelPath);
            if (found.conversations < minimumConversations)
                fail(
                    `--conversations ${dataDir}: ${found.conversations} conversation${found.conversations === 1 ? "" : "s"} with ${path.basename(modelPath)}, ` +
                        `at least ${minimumConversations} are needed (some to calibrate on, one held out)`
                );
            console.error(`reading ${found.conversations} conversations (${found.exchanges} answers, about ${found.tokens} tokens)`);
            return found.texts;
        } finally {
            db.dispose();
        }
    } finally {
        lock.dispose();
    }
}

async function readPromptsFile(file: string): Promise<string[]> {
    try {
        return parsePromptsFile(await fs.readFile(file, "utf8"));
    } catch (err) {
        fail(`--prompts-file ${file}: ${(err as Error).message}`);
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
    const done = p.stage === "thinking" || p.stage === "reading" ? p.done.toFixed(1) : String(p.done);
    console.error(
        `${p.stage} ${done}/${p.total}` +
            (p.resumed > 0 ? ` (${p.resumed} resumed)` : "") +
            ` | ${p.tokensSeen} tokens | ${minutes(p.elapsed)}` +
            (p.remaining != null ? `, about ${minutes(p.remaining)} left` : "")
    );
}

let llama;
let model;
try {
    llama = await loadPatchedLlama({gpu: "auto", logLevel: "error"});
    model = await llama.loadModel({modelPath});
} catch (err) {
    await llama?.dispose();
    fail(`${path.basename(modelPath)} could not be loaded: ${(err as Error).message}`);
}
try {
    console.error(
        `calibrating ${path.basename(modelPath)} on ${{english: "Ponder's English prompts", own: "questions it writes itself", demo: "the demo task's training problems", merge: "the merge task's training problems", multi: "the many-task model's training problems", file: `the ${promptList?.length ?? 0} prompts of ${values["prompts-file"]}`, conversations: "its conversations, read", traces: "a trace file, read"}[promptSet]}`
    );
    const run = (seed: number | undefined) =>
        calibrateRetention({
            model: model!,
            modelPath,
            promptSet,
            promptList,
            texts,
            ...options,
            seed,
            out: values.out != null ? path.resolve(values.out) : undefined,
            workDir: path.resolve(values["work-dir"]),
            keepRefusedWork: true,
            keepWork: values["keep-work"],
            signal: controller.signal,
            onProgress,
            onLog: (line) => console.error(line)
        });
    let result = await run(options.seed);
    // another draw of the model's own questions after a refusal: the next seed's
    for (let draw = 1; draw < draws && !result.installed && result.promptSet === "own"; draw++) {
        const seed = (options.seed ?? 0) + draw;
        console.error(`${result.refusal}
draw ${draw + 1} of ${draws}: the model writes its questions again with seed ${seed}`);
        result = await run(seed);
    }
    // the card the app shows for the result
    const card = describeCalibrationResult({
        promptSet,
        prompts: result.prompts,
        tokens: result.tokensSeen,
        samples: result.samples,
        seconds: result.seconds,
        date: new Date().toISOString(),
        texts: result.texts,
        validation: result.validation
    });
    const kept =
        result.workKept == null
            ? ""
            : `\nthe model's thinking on the ${result.prompts} prompts is kept in ${result.workKept}: the same command with other --hidden, --epochs or --horizon-weights goes on from it without thinking again`;
    console.error(
        (result.installed
            ? `${card}\nwrote ${result.out}${result.backup != null ? ` (the earlier gates are in ${result.backup})` : ""}`
            : `${card}\n${result.refusal}`) + kept
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
