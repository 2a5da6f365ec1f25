import {createHash} from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import {resolveChatWrapper, type LlamaModel} from "node-llama-cpp";
import {NativeKv} from "../native/NativeKv.js";
import {gguf, type GgufValue} from "../gguf/writeGguf.js";
import {retentionSidecarPath} from "../retention/findRetentionGates.js";
import {modelFingerprint} from "../retention/modelFingerprint.js";
import {writeRetentionSidecar} from "../retention/writeRetentionSidecar.js";
import {collectCalibrationData} from "./collectCalibrationData.js";
import {concatDatasets, readDatasetFile, writeDatasetFile} from "./datasetFile.js";
import {calibrationPrompts, type PromptSet} from "./prompts.js";
import {trainGates, type TrainedGates} from "./trainGates.js";
import type {CalibrationDataset, CalibrationPrompt, CollectCalibrationOptions} from "./types.js";
import {validateGates, type ValidationReport} from "./validateGates.js";

// A model's retention gates from its own thinking (issue 36): the model thinks with Full KV on calibration prompts
// (its read horizons and gate inputs recorded natively), the gates are fitted to them (trainGates), measured against
// Lethe on held-out prompts (validateGates) and, when they do at least as well, written beside the model with their
// provenance. Each prompt's data is kept in the work folder as soon as it is thought, so a cancelled, killed or crashed
// calibration goes on from the next prompt with the same settings; the trained candidate is kept there too.

export type CalibrationStage = "thinking" | "training" | "validating" | "writing";

export type CalibrationJobProgress = {
    stage: CalibrationStage;
    /** Steps done and to do in this stage: prompts (thinking), layer-epochs (training), runs (validating). */
    done: number;
    total: number;
    /** Seconds since this run of the job started. */
    elapsed: number;
    /** Seconds the whole job still needs, estimated from the work done so far; `null` before anything is measured. */
    remaining: number | null;
    /** Prompts thought in an earlier run of the job that this one goes on from. */
    resumed: number;
    /** Tokens written so far (thinking). */
    tokensSeen: number;
};

export type CalibrateRetentionOptions = {
    model: LlamaModel;
    modelPath: string;
    /**
     * The prompts: `"demo"` or `"merge"` for the task models Ponder ships (their task's training problems), else
     * `"english"`.
     */
    promptSet: PromptSet;
    /** Calibration prompts the model thinks through. Defaults to `48` (demo, merge) or `32`. */
    prompts?: number;
    /** Held-out prompts of the validation. Defaults to `8` (demo, merge) or `4`. */
    validationPrompts?: number;
    /** Tokens the gates are fitted on: a seeded sample of every token written. Defaults to `65536`. */
    tokens?: number;
    /**
     * Bound on the gate inputs kept for training, in bytes (F32 rows of every layer): lowers `tokens` where the model is
     * wide (a 7B model's row is 32 x 4,096 floats, 512 KiB). Defaults to `1073741824` (1 GiB).
     */
    maxFeatureBytes?: number;
    /** Tokens the model may write per prompt. Defaults to `3000` (demo: its longest thoughts are about 2,200) or `2048`. */
    maxTokens?: number;
    /** Seed of the prompts (0-49), the sampling and the training. Defaults to `0`. */
    seed?: number;
    /** Gate hidden width. Defaults to `64`. */
    hidden?: number;
    /** Training passes over the tokens. Defaults to `8`. */
    epochs?: number;
    /** Where the sidecar goes. Defaults to `<model>.retention.gguf`, beside the model. */
    out?: string;
    /** Folder of the checkpoints (one subfolder per model and settings). */
    workDir: string;
    threads?: number;
    signal?: AbortSignal;
    onProgress?: (progress: CalibrationJobProgress) => void;
    /** Lines for a log. */
    onLog?: (line: string) => void;
};

export type CalibrationResult = {
    /** Whether the gates were written to `out`. */
    installed: boolean;
    out: string;
    /** Where the sidecar that was at `out` was copied before it was replaced; `null` when none was there or none was replaced. */
    backup: string | null;
    /** Why the gates were not installed, in words with the numbers; `null` when installed. */
    refusal: string | null;
    prompts: number;
    tokensSeen: number;
    samples: number;
    /** Seconds of thinking, training and validation, summed over every run of the job. */
    seconds: number;
    validation: ValidationReport;
    trainLoss: number[];
};

/** The calibration job; see the module's comment. Rejects with the signal's reason when cancelled (the work folder stays). */
export async function calibrateRetention(options: CalibrateRetentionOptions): Promise<CalibrationResult> {
    const started = performance.now();
    const task = options.promptSet !== "english";
    const settings = {
        promptSet: options.promptSet,
        prompts: options.prompts ?? (task ? 48 : 32),
        validationPrompts: options.validationPrompts ?? (task ? 8 : 4),
        tokens: options.tokens ?? 65536,
        maxTokens: options.maxTokens ?? (options.promptSet === "demo" ? 3000 : 2048),
        seed: options.seed ?? 0,
        hidden: options.hidden ?? 64,
        epochs: options.epochs ?? 8
    };
    const out = options.out ?? retentionSidecarPath(options.modelPath);
    const log = options.onLog ?? (() => undefined);
    const fingerprint = await modelFingerprint(options.modelPath);
    const key = createHash("sha256")
        .update(JSON.stringify({fingerprint, ...settings}))
        .digest("hex")
        .slice(0, 16);
    const work = path.join(options.workDir, key);
    await fs.mkdir(work, {recursive: true});
    const job = await readJob(work);
    const prompts = calibrationPrompts(settings.promptSet, settings.prompts, settings.seed);
    const heldOut = calibrationPrompts(settings.promptSet, settings.validationPrompts, settings.seed, true);
    let spent = job.seconds;
    const saveJob = async () => {
        await fs.writeFile(
            path.join(work, "job.json"),
            JSON.stringify({...settings, fingerprint, seconds: spent + (performance.now() - started) / 1000})
        );
    };

    // Thinking: one prompt at a time, each kept on disk as soon as it is done.
    const rowBytes = (options.model.fileInsights.totalLayers - 1) * options.model.embeddingVectorSize * 4; // totalLayers counts the output layer
    const perPrompt = Math.max(
        1,
        Math.min(
            Math.ceil(settings.tokens / settings.prompts),
            Math.floor((options.maxFeatureBytes ?? 2 ** 30) / rowBytes / settings.prompts)
        )
    );
    const parts: CalibrationDataset[] = [];
    let resumed = 0;
    let tokensSeen = 0;
    let thinkingSeconds = 0;
    let thought = 0;
    const progress = (stage: CalibrationStage, done: number, total: number, remaining: number | null) =>
        options.onProgress?.({
            stage,
            done,
            total,
            elapsed: (performance.now() - started) / 1000,
            remaining,
            resumed,
            tokensSeen
        });
    const files = prompts.map((_, index) => path.join(work, `prompt-${String(index).padStart(4, "0")}.cal`));
    const kept = await Promise.all(files.map((file) => readDatasetFile(file).catch(() => null)));
    const missing = kept.flatMap((data, index) => (data == null ? [index] : []));
    resumed = prompts.length - missing.length;
    tokensSeen = kept.reduce((sum, data) => sum + (data?.tokensSeen ?? 0), 0);
    if (missing.length > 0) {
        const chatWrapper = resolveChatWrapper(options.model);
        const longest = Math.max(...missing.map((index) => options.model.tokenize(prompts[index]!.user).length));
        // the rendered prompt adds the template's markers to the message's own tokens
        const context = await options.model.createContext({
            contextSize: longest + 256 + settings.maxTokens,
            threads: options.threads ?? 1,
            sequences: 1,
            flashAttention: false
        });
        const kv = new NativeKv(context);
        try {
            const engine = {model: options.model, chatWrapper, sequence: context.getSequence(), kv};
            for (const index of missing) {
                options.signal?.throwIfAborted();
                const t0 = performance.now();
                const data = await collectCalibrationData(engine, [toPrompt(prompts[index]!.user)], {
                    maxTokens: settings.maxTokens,
                    maxSamples: perPrompt,
                    seed: settings.seed * 100_000 + index,
                    signal: options.signal,
                    onProgress: (p) => progress("thinking", index + p.generated / settings.maxTokens, prompts.length, null)
                } satisfies CollectCalibrationOptions);
                if (data.texts.every((text) => text.generatedTokens === 0)) log(`prompt ${index + 1}: the model wrote nothing`);
                await writeDatasetFile(files[index]!, data);
                kept[index] = data;
                tokensSeen += data.tokensSeen;
                thinkingSeconds += (performance.now() - t0) / 1000;
                thought++;
                await saveJob();
                const left = missing.length - thought;
                progress(
                    "thinking",
                    index + 1,
                    prompts.length,
                    (thinkingSeconds / thought) * (left + settings.validationPrompts * 2) + trainingEstimate(data, settings)
                );
                log(
                    `thinking ${index + 1}/${prompts.length}: ${data.texts[0]?.generatedTokens ?? 0} tokens written (${data.texts[0]?.stop ?? "-"}), ${data.tokens} kept`
                );
            }
        } finally {
            await kv.dispose();
            await context.dispose();
        }
    }
    parts.push(...kept.map((data) => data!));
    const dataset = concatDatasets(parts);
    if (dataset.tokens === 0 || dataset.texts.every((text) => text.generatedTokens === 0))
        throw new Error("The model wrote nothing on the calibration prompts: there is no thinking to calibrate on");

    // Training: the candidate is kept in the work folder, so a resumed job validates it without training again.
    const candidate = path.join(work, "candidate.retention.gguf");
    const gatesFile = path.join(work, "gates.f32");
    let trainLoss: number[] = job.trainLoss ?? [];
    let gates = trainLoss.length > 0 ? await readGatesFile(gatesFile).catch(() => null) : null;
    if (
        gates == null ||
        !(await fs.access(candidate).then(
            () => true,
            () => false
        ))
    ) {
        const t0 = performance.now();
        const report = await trainGates(dataset, {
            hidden: settings.hidden,
            epochs: settings.epochs,
            seed: settings.seed + 1,
            signal: options.signal,
            onProgress: (p) => {
                const done = p.layer * p.epochs + p.epoch;
                const total = p.layers * p.epochs;
                const seconds = (performance.now() - t0) / 1000;
                progress(
                    "training",
                    done,
                    total,
                    (seconds / done) * (total - done) + settings.validationPrompts * 2 * (thinkingSeconds / Math.max(1, thought) || 10)
                );
            }
        });
        trainLoss = report.loss;
        gates = report.gates;
        await writeGatesFile(gatesFile, gates);
        log(
            `trained ${dataset.layers} layers on ${dataset.tokens} tokens in ${report.seconds.toFixed(1)} s; horizon loss per layer ${report.loss.map((l) => l.toFixed(3)).join(", ")}`
        );
        await writeSidecar(candidate, options.modelPath, report.gates, settings, provenance(settings, prompts.length, dataset, 0, null));
        await fs.writeFile(
            path.join(work, "job.json"),
            JSON.stringify({...settings, fingerprint, seconds: spent + (performance.now() - started) / 1000, trainLoss})
        );
    }

    // Validation against Lethe on held-out prompts.
    const validationStart = performance.now();
    const validation = await validateGates({
        model: options.model,
        prompts: heldOut.map((p) => p.user),
        gates: candidate,
        maxTokens: settings.maxTokens,
        threads: options.threads,
        signal: options.signal,
        onProgress: (done, total) =>
            progress("validating", done, total, ((performance.now() - validationStart) / 1000 / done) * (total - done))
    });
    const seconds = spent + (performance.now() - started) / 1000;
    const numbers = validation.points
        .map((p) => `at ${Math.round(p.share * 100)}%: ${p.gates.toFixed(3)}, Lethe ${p.lethe.toFixed(3)}`)
        .join("; ");
    log(`validation on ${validation.prompts} held-out prompts (${validation.tokens} tokens), top-1 agreement with Full ${numbers}`);
    const result = {out, prompts: prompts.length, tokensSeen: dataset.tokensSeen, samples: dataset.tokens, seconds, validation, trainLoss};
    if (!validation.passed) {
        spent = seconds;
        await fs.rm(work, {recursive: true, force: true});
        return {
            ...result,
            installed: false,
            backup: null,
            refusal: `The calibrated gates agree with Full less than Lethe does on ${validation.prompts} held-out prompts (${numbers}): not installed`
        };
    }

    progress("writing", 0, 1, 0);
    const backup = await fs.access(out).then(
        async () => {
            const copy = `${out}.previous`;
            await fs.copyFile(out, copy);
            return copy;
        },
        () => null
    );
    await writeSidecar(out, options.modelPath, gates, settings, provenance(settings, prompts.length, dataset, seconds, validation));
    await fs.rm(work, {recursive: true, force: true});
    progress("writing", 1, 1, 0);
    return {...result, installed: true, backup, refusal: null};
}

type Settings = {
    promptSet: PromptSet;
    prompts: number;
    validationPrompts: number;
    tokens: number;
    maxTokens: number;
    seed: number;
    hidden: number;
    epochs: number;
};

function toPrompt(user: string): CalibrationPrompt {
    return {user};
}

async function readJob(work: string): Promise<{seconds: number; trainLoss?: number[]}> {
    try {
        const job = JSON.parse(await fs.readFile(path.join(work, "job.json"), "utf8")) as {seconds?: number; trainLoss?: number[]};
        return {seconds: job.seconds ?? 0, trainLoss: job.trainLoss};
    } catch {
        return {seconds: 0};
    }
}

/**
 * Seconds to train on as many samples as one prompt's (`sample`) times the prompts: about 4 x layers x width x hidden
 * multiply-adds per sample and epoch (forward and the first layer's gradient) at about 1.5e9 a second (measured here).
 */
function trainingEstimate(sample: CalibrationDataset, settings: Settings): number {
    return (
        (Math.min(settings.tokens, sample.tokens * settings.prompts) *
            sample.layers *
            sample.embeddingLength *
            settings.hidden *
            4 *
            settings.epochs) /
        1.5e9
    );
}

/** The `ponder.retention.calibration.*` keys: what the gates were made from and how they validated. */
function provenance(
    settings: Settings,
    prompts: number,
    data: CalibrationDataset,
    seconds: number,
    validation: ValidationReport | null
): [string, GgufValue][] {
    const key = "ponder.retention.calibration.";
    const entries: [string, GgufValue][] = [
        [key + "prompt_set", gguf.string(settings.promptSet)],
        [key + "prompts", gguf.u32(prompts)],
        [key + "tokens", gguf.u32(data.tokensSeen)],
        [key + "samples", gguf.u32(data.tokens)],
        [key + "seed", gguf.u32(settings.seed)],
        [key + "read_threshold", gguf.f32(data.readThreshold)],
        [key + "seconds", gguf.u32(Math.round(seconds))],
        [key + "date", gguf.string(new Date().toISOString())]
    ];
    if (validation != null) {
        entries.push([key + "validation.prompts", gguf.u32(validation.prompts)], [key + "validation.tokens", gguf.u32(validation.tokens)]);
        for (const point of validation.points) {
            const share = String(Math.round(point.share * 100));
            entries.push(
                [`${key}validation.agreement_${share}`, gguf.f32(point.gates)],
                [`${key}validation.lethe_${share}`, gguf.f32(point.lethe)]
            );
        }
    }
    return entries;
}

async function writeSidecar(
    file: string,
    modelPath: string,
    gates: TrainedGates,
    settings: Settings,
    extra: [string, GgufValue][]
): Promise<void> {
    await writeRetentionSidecar(file, {
        modelPath,
        layers: gates.gates,
        budget: 0,
        reduction: "shared",
        extra,
        source:
            `ponder calibrate: ${settings.prompts} ${settings.promptSet === "english" ? "English" : `${settings.promptSet}-task`} prompts, seed ${settings.seed}, ` +
            `${settings.tokens} tokens at most, read horizons fitted per layer and KV head (hidden ${settings.hidden}, ${settings.epochs} epochs), ranked by the shared maximum`
    });
}

/** The trained gates as F32 bytes behind a JSON line of their shape (the candidate sidecar may hold F16 matrices). */
async function writeGatesFile(file: string, gates: TrainedGates): Promise<void> {
    const {layers, width, hidden, kvHeads} = gates;
    const head = Buffer.from(JSON.stringify({layers, width, hidden, kvHeads}) + "\n", "utf8");
    const body = gates.gates.flatMap((g) =>
        [g.fc1, g.fc1Bias, g.fc2, g.bias].map((v) => Buffer.from(v.buffer, v.byteOffset, v.byteLength))
    );
    const temp = `${file}.tmp`;
    await fs.writeFile(temp, Buffer.concat([head, ...body]));
    await fs.rename(temp, file);
}

async function readGatesFile(file: string): Promise<TrainedGates> {
    const bytes = await fs.readFile(file);
    const newline = bytes.indexOf(10);
    const {layers, width, hidden, kvHeads} = JSON.parse(bytes.toString("utf8", 0, newline)) as Omit<TrainedGates, "gates">;
    let at = newline + 1;
    const take = (n: number) => {
        const out = new Float32Array(bytes.buffer.slice(bytes.byteOffset + at, bytes.byteOffset + at + n * 4));
        if (out.length !== n) throw new Error(`${file} is cut short`);
        at += n * 4;
        return out;
    };
    const gates = Array.from({length: layers}, () => ({
        fc1: take(hidden * width),
        fc1Bias: take(hidden),
        fc2: take(kvHeads * hidden),
        bias: take(kvHeads)
    }));
    return {layers, width, hidden, kvHeads, gates};
}
