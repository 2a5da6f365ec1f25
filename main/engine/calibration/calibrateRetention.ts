import {createHash} from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import {resolveChatWrapper, type LlamaModel} from "node-llama-cpp";
import {NativeKv} from "../native/NativeKv.js";
import {retentionSidecarPath} from "../retention/findRetentionGates.js";
import {modelFingerprint} from "../retention/modelFingerprint.js";
import {collectCalibrationData} from "./collectCalibrationData.js";
import {readCalibrationData, type TextToRead} from "./readCalibrationData.js";
import {concatDatasets, readDatasetFile, writeDatasetFile} from "./datasetFile.js";
import {readGatesFile, writeGatesFile} from "./gatesFile.js";
import {jobPrompts} from "./jobPrompts.js";
import type {PromptSet} from "./prompts.js";
import {AppError} from "../../AppError.js";
import {trainGates, type TrainedGates} from "./trainGates.js";
import type {CalibrationDataset, CalibrationPrompt, CollectCalibrationOptions} from "./types.js";
import {validateCandidates, validationScore, type ValidationReport} from "./validateGates.js";
import {calibrationProvenance, textLengths, writeCalibratedSidecar, type CalibrationSettings} from "./writeCalibratedSidecar.js";
import {renderWrittenText, type WrittenText} from "./writtenTexts.js";

// A model's retention gates from its own thinking: the model thinks with Full KV on calibration prompts (its read
// horizons and gate inputs recorded natively), or texts it already wrote (its conversations, a trace file) are read with
// Full KV at prompt speed (readCalibrationData), the gates are fitted to them (trainGates), measured against
// Lethe on held-out prompts (validateGates) and, when they do at least as well, written beside the model with their
// provenance. Each prompt's data is kept in the work folder as soon as it is thought, so a cancelled, killed or crashed
// calibration goes on from the next prompt with the same settings; the trained candidates are kept there too, apart
// per training setting, so a job that changes only how the gates are trained (width, epochs, weights) thinks nothing
// again. The read threshold that makes the labels and the weight of long horizons in the loss are chosen per model:
// one candidate is fitted per threshold and weight (each text is read again at the other thresholds,
// `collectCalibrationData`), and the validation keeps the best: which candidate wins differs between the task models
// (docs/BENCHMARKS.md, "Calibration").

export type CalibrationStage = "questions" | "thinking" | "reading" | "training" | "validating" | "writing";

export type CalibrationJobProgress = {
    stage: CalibrationStage;
    /**
     * Steps done and to do in this stage: questions written (questions, a model's own), prompts (thinking), layer-epochs
     * (training), runs (validating).
     */
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
     * The prompts: `"demo"` or `"merge"` for the task models Ponder ships (their task's training problems), `"own"` for
     * questions the model writes itself (`writeOwnPrompts`; Ponder's English prompts when it writes too few), or
     * `"english"`.
     */
    promptSet: PromptSet;
    /** The prompts of the `"file"` set (`parsePromptsFile`): the last `validationPrompts` are held out. */
    promptList?: string[];
    /**
     * The texts of the `"conversations"` and `"traces"` sets, already written (`writtenTexts.ts`): each is read with Full
     * KV at prompt speed instead of being written; the last `validationPrompts` are held out (their first questions).
     */
    texts?: WrittenText[];
    /** Calibration prompts the model thinks through. Defaults to `48` (demo, merge) or `32`. */
    prompts?: number;
    /** Held-out prompts of the validation. Defaults to `8` (demo, merge, own) or `4` (English). */
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
    /**
     * Shares of one head's attention that count as a read of a token (the labels' read horizon): one candidate is
     * trained per threshold and the validation keeps the best. Defaults to `[0.5, 0.25]`.
     */
    readThresholds?: number[];
    /** Training passes over the tokens. Defaults to `8`. */
    epochs?: number;
    /**
     * Each label's weight in the loss is (1 + horizon)^horizonWeight (`trainGates`): one candidate is trained per read
     * threshold and weight. Defaults to `[1, 0.5]`.
     */
    horizonWeights?: number[];
    /** Where the sidecar goes. Defaults to `<model>.retention.gguf`, beside the model. */
    out?: string;
    /** Folder of the checkpoints (one subfolder per model and thinking settings, one below it per training setting). */
    workDir: string;
    /**
     * Whether refused gates leave the work folder (the model's thinking, the candidates) in place, for another job that
     * trains differently to start from; else it is removed, as it is once gates are installed. Defaults to `false`.
     */
    keepRefusedWork?: boolean;
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
    /** The work folder refused gates left in place (`keepRefusedWork`); else `null`. */
    workKept: string | null;
    /** The prompts thought through: the set asked for, or `"english"` where the model wrote too few of its own. */
    promptSet: PromptSet;
    prompts: number;
    tokensSeen: number;
    samples: number;
    /** The texts' lengths in tokens (prompt and thought), and how many a limit cut. */
    texts: {mean: number; longest: number; cut: number};
    /** Seconds of thinking, training and validation, summed over every run of the job. */
    seconds: number;
    /** The read threshold of the labels the kept (or refused) gates were fitted to: the best candidate's. */
    readThreshold: number;
    /** The best candidate's horizon weight. */
    horizonWeight: number;
    /** The best candidate's validation. */
    validation: ValidationReport;
    trainLoss: number[];
};

/** The calibration job; see the module's comment. Rejects with the signal's reason when cancelled (the work folder stays). */
export async function calibrateRetention(options: CalibrateRetentionOptions): Promise<CalibrationResult> {
    const started = performance.now();
    const task = options.promptSet === "demo" || options.promptSet === "merge";
    const written = options.promptSet === "conversations" || options.promptSet === "traces";
    if (written !== (options.texts != null))
        throw new RangeError("texts are given with the conversations and traces sets, and with them only");
    const texts = options.texts ?? [];
    if (written && texts.length < 2)
        throw new AppError("BAD_REQUEST", `Calibration from written text needs at least 2 texts (one held out), got ${texts.length}`);
    const validationDefault = written ? Math.min(8, Math.max(1, Math.round(texts.length / 6))) : options.promptSet === "english" ? 4 : 8;
    const validationPrompts = Math.min(options.validationPrompts ?? validationDefault, written ? texts.length - 1 : Infinity);
    const settings = {
        promptSet: options.promptSet,
        prompts: options.prompts ?? (written ? texts.length - validationPrompts : task ? 48 : 32),
        validationPrompts,
        tokens: options.tokens ?? 65536,
        maxTokens:
            options.maxTokens ?? (written ? Math.min(4096, options.model.trainContextSize) : options.promptSet === "demo" ? 3000 : 2048),
        seed: options.seed ?? 0,
        hidden: options.hidden ?? 64,
        epochs: options.epochs ?? 8,
        horizonWeights: options.horizonWeights ?? [1, 0.5],
        readThresholds: options.readThresholds ?? [0.5, 0.25]
    };
    if (settings.readThresholds.length === 0 || settings.readThresholds.some((t) => !(t > 0 && t <= 1)))
        throw new RangeError("the read thresholds must be one or more shares within (0, 1]");
    if (settings.horizonWeights.length === 0 || settings.horizonWeights.some((w) => !(w >= 0 && w <= 4)))
        throw new RangeError("the horizon weights must be one or more numbers from 0 to 4");
    const out = options.out ?? retentionSidecarPath(options.modelPath);
    const log = options.onLog ?? (() => undefined);
    const fingerprint = await modelFingerprint(options.modelPath);
    const {hidden, epochs, horizonWeights, validationPrompts: heldOutCount, ...thinking} = settings;
    // the held-out prompts of a model's own questions, a file or written texts are taken from the same list as the others
    const listed = settings.promptSet === "own" || settings.promptSet === "file" || written;
    const heldOutKey = listed
        ? {
              validationPrompts: heldOutCount,
              promptList: options.promptList && hashOf(options.promptList),
              texts: written ? hashOf(texts) : undefined
          }
        : {};
    const work = path.join(options.workDir, hashOf({fingerprint, ...thinking, ...heldOutKey}));
    const trainDir = path.join(work, `train-${hashOf({hidden, epochs, horizonWeights})}`);
    await fs.mkdir(trainDir, {recursive: true});
    const job = await readJob(work, trainDir);
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
    // The model's own questions are written first (a sampled user turn each), and kept with the job.
    const {
        set: usedSet,
        prompts,
        heldOut
    } = written
        ? writtenPrompts(options.promptSet, texts, settings.prompts, settings.validationPrompts)
        : await jobPrompts(options.model, {...settings, promptList: options.promptList}, work, {
              threads: options.threads,
              signal: options.signal,
              onLog: log,
              onProgress: (done) => progress("questions", done, settings.prompts + settings.validationPrompts, null)
          });
    const made = {...settings, promptSet: usedSet};
    const files = prompts.map((_, index) => path.join(work, `prompt-${String(index).padStart(4, "0")}.cal`));
    const kept = await Promise.all(files.map((file) => readDatasetFile(file).catch(() => null)));
    const missing = kept.flatMap((data, index) => (data == null ? [index] : []));
    resumed = prompts.length - missing.length;
    tokensSeen = kept.reduce((sum, data) => sum + (data?.tokensSeen ?? 0), 0);
    if (missing.length > 0 && written) {
        const t0 = performance.now();
        const read = await readTexts(options, texts, missing, files, settings, perPrompt, {
            progress: (done, total) => progress("reading", done, total, null),
            onRead: (data) => {
                tokensSeen += data.tokensSeen;
            },
            log
        });
        for (const [index, data] of read) kept[index] = data;
        thinkingSeconds += (performance.now() - t0) / 1000;
        thought += read.size;
        await saveJob();
    } else if (missing.length > 0) {
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
                    readThreshold: settings.readThresholds[0],
                    moreReadThresholds: settings.readThresholds.slice(1),
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

    // Training, one candidate per read threshold and horizon weight, each kept in the work folder: a resumed job
    // validates them without training again.
    const kinds = settings.readThresholds.flatMap((readThreshold, t) =>
        settings.horizonWeights.map((horizonWeight) => ({readThreshold, horizons: t, horizonWeight}))
    );
    const candidates = kinds.map((_, k) => path.join(trainDir, `candidate-${k}.retention.gguf`));
    const gatesFiles = kinds.map((_, k) => path.join(trainDir, `gates-${k}.f32`));
    let trainLoss: number[][] = job.trainLoss ?? [];
    let trained: TrainedGates[] | null =
        trainLoss.length === kinds.length ? await Promise.all(gatesFiles.map((file) => readGatesFile(file))).catch(() => null) : null;
    const candidatesKept = await Promise.all(
        candidates.map((file) =>
            fs.access(file).then(
                () => true,
                () => false
            )
        )
    );
    if (trained == null || candidatesKept.includes(false)) {
        const t0 = performance.now();
        trained = [];
        trainLoss = [];
        for (const [k, {readThreshold, horizons, horizonWeight}] of kinds.entries()) {
            const labels = horizons === 0 ? dataset : {...dataset, readThreshold, horizons: dataset.alternatives![horizons - 1]!.horizons};
            const report = await trainGates(labels, {
                hidden: settings.hidden,
                epochs: settings.epochs,
                horizonWeight,
                seed: settings.seed + 1,
                signal: options.signal,
                onProgress: (p) => {
                    const done = (k * p.layers + p.layer) * p.epochs + p.epoch;
                    const total = kinds.length * p.layers * p.epochs;
                    const seconds = (performance.now() - t0) / 1000;
                    progress(
                        "training",
                        done,
                        total,
                        (seconds / done) * (total - done) +
                            settings.validationPrompts * (1 + 2 * (1 + kinds.length)) * (thinkingSeconds / Math.max(1, thought) || 10)
                    );
                }
            });
            trained.push(report.gates);
            trainLoss.push(report.loss);
            await writeGatesFile(gatesFiles[k]!, report.gates);
            log(
                `trained ${dataset.layers} layers on ${dataset.tokens} tokens read at ${readThreshold}, weighed by horizon^${horizonWeight}, in ${report.seconds.toFixed(1)} s; horizon loss per layer ${report.loss.map((l) => l.toFixed(3)).join(", ")}`
            );
            await writeCalibratedSidecar(
                candidates[k]!,
                options.modelPath,
                report.gates,
                made,
                calibrationProvenance(made, prompts.length, dataset, kinds[k]!, 0, null)
            );
        }
        await fs.writeFile(path.join(trainDir, "train.json"), JSON.stringify({hidden, epochs, horizonWeights, trainLoss}));
        await saveJob();
    }

    // Validation of every candidate against Lethe on held-out prompts; the best one is kept if it beats Lethe.
    const validationStart = performance.now();
    const reports = await validateCandidates({
        model: options.model,
        prompts: heldOut.map((p) => p.user),
        candidates,
        maxTokens: written
            ? validationTokens(options.model, texts.slice(texts.length - heldOut.length), settings.maxTokens)
            : settings.maxTokens,
        threads: options.threads,
        signal: options.signal,
        onProgress: (done, total) =>
            progress("validating", done, total, ((performance.now() - validationStart) / 1000 / done) * (total - done))
    });
    const describe = (validation: ValidationReport) =>
        validation.points
            .map(
                (p) =>
                    `at ${Math.round(p.share * 100)}%: ${p.gates.toFixed(3)}, Lethe ${p.lethe.toFixed(3)}` +
                    (p.answers == null ? "" : ` (answers ${p.answers.gates.toFixed(3)}, Lethe ${p.answers.lethe.toFixed(3)})`)
            )
            .join("; ");
    const score = (validation: ValidationReport) => validationScore(validation.points, validation.tokens, validation.answerTokens, "gates");
    let best = 0;
    for (const [k, validation] of reports.entries()) {
        log(
            `validation of the gates read at ${kinds[k]!.readThreshold}, weighed by horizon^${kinds[k]!.horizonWeight}, on ${validation.prompts} held-out prompts (${validation.tokens} tokens, ${validation.answerTokens} of them answers), top-1 agreement with Full ${describe(validation)}`
        );
        if (score(validation) > score(reports[best]!)) best = k;
    }
    const validation = reports[best]!;
    const gates = trained[best]!;
    const {readThreshold, horizonWeight} = kinds[best]!;
    const numbers = describe(validation);
    if (kinds.length > 1) log(`kept the gates read at ${readThreshold}, weighed by horizon^${horizonWeight}`);
    const seconds = spent + (performance.now() - started) / 1000;
    const result = {
        out,
        prompts: prompts.length,
        tokensSeen: dataset.tokensSeen,
        samples: dataset.tokens,
        texts: textLengths(dataset),
        seconds,
        readThreshold,
        horizonWeight,
        validation,
        trainLoss: trainLoss[best]!
    };
    if (!validation.passed) {
        spent = seconds;
        const keep = options.keepRefusedWork === true;
        if (keep) await saveJob();
        else await fs.rm(work, {recursive: true, force: true});
        return {
            ...result,
            installed: false,
            backup: null,
            refusal:
                `The calibrated gates do worse than Lethe on ${validation.prompts} held-out prompts (top-1 agreement with Full ${numbers}): not installed. ` +
                nextTry(usedSet),
            workKept: keep ? work : null,
            promptSet: usedSet
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
    await writeCalibratedSidecar(
        out,
        options.modelPath,
        gates,
        made,
        calibrationProvenance(made, prompts.length, dataset, kinds[best]!, seconds, validation)
    );
    await fs.rm(work, {recursive: true, force: true});
    progress("writing", 1, 1, 0);
    return {...result, installed: true, backup, refusal: null, workKept: null, promptSet: usedSet};
}

/** What to try after a refusal, by the prompts the refused gates were made from. */
export function nextTry(set: PromptSet): string {
    switch (set) {
        case "own":
        case "english":
            return "Try calibrating from your conversations with the model, from prompts of the tasks you ask it (a prompts file), or with another seed (another draw of its questions).";
        case "file":
            return "Try more prompts of the tasks you ask it, or calibrating from your conversations with the model.";
        case "conversations":
        case "traces":
            return "Try more texts, longer ones (horizons learned on short texts are short), or a prompts file of the tasks you ask it.";
        case "demo":
        case "merge":
            return "Try another seed, or more prompts.";
    }
}

/** The texts read and the held-out questions of a calibration from written text: the last `heldOut` texts held out. */
function writtenPrompts(set: PromptSet, texts: WrittenText[], count: number, heldOut: number) {
    const asPrompt = (text: WrittenText, seed: number) => ({kind: set, user: text.turns[0]!.user, seed});
    return {
        set,
        prompts: texts.slice(0, count).map(asPrompt),
        heldOut: texts.slice(texts.length - heldOut).map((text, i) => asPrompt(text, texts.length - heldOut + i))
    };
}

/**
 * Reads the `missing` texts with Full KV (`readCalibrationData`), each cut to `settings.maxTokens`, in one context sized
 * to the longest; each text's data is kept in its file as soon as it is read, so a cancelled job goes on from the next.
 */
async function readTexts(
    options: CalibrateRetentionOptions,
    texts: WrittenText[],
    missing: number[],
    files: string[],
    settings: {maxTokens: number; readThresholds: number[]; seed: number},
    perText: number,
    report: {progress: (done: number, total: number) => void; onRead: (data: CalibrationDataset) => void; log: (line: string) => void}
): Promise<Map<number, CalibrationDataset>> {
    const chatWrapper = resolveChatWrapper(options.model);
    const rendered = new Map<number, TextToRead>();
    for (const index of missing) {
        const text = renderWrittenText(options.model, chatWrapper, texts[index]!, settings.maxTokens);
        if (text.cut) report.log(`text ${index + 1}: cut to ${settings.maxTokens} tokens (the reading limit)`);
        rendered.set(index, text);
    }
    const longest = Math.max(...[...rendered.values()].map((text) => text.tokens.length));
    const context = await options.model.createContext({
        contextSize: longest + 16,
        threads: options.threads ?? 1,
        sequences: 1,
        flashAttention: false
    });
    const kv = new NativeKv(context);
    const read = new Map<number, CalibrationDataset>();
    try {
        const engine = {model: options.model, sequence: context.getSequence(), kv};
        for (const [done, index] of missing.entries()) {
            options.signal?.throwIfAborted();
            const text = rendered.get(index)!;
            const data = await readCalibrationData(engine, [text], {
                maxSamples: perText,
                readThreshold: settings.readThresholds[0],
                moreReadThresholds: settings.readThresholds.slice(1),
                seed: settings.seed * 100_000 + index,
                signal: options.signal,
                onProgress: (p) => report.progress(done + p.generated / text.tokens.length, missing.length)
            });
            await writeDatasetFile(files[index]!, data);
            read.set(index, data);
            report.onRead(data);
            report.progress(done + 1, missing.length);
            report.log(`reading ${done + 1}/${missing.length}: ${text.tokens.length} tokens read, ${data.tokens} kept`);
        }
    } finally {
        await kv.dispose();
        await context.dispose();
    }
    return read;
}

/**
 * Tokens the model may write on each held-out question of written texts: a quarter more than the longest of their
 * written first answers (thought and answer), at most `limit`.
 */
function validationTokens(model: LlamaModel, heldOut: WrittenText[], limit: number): number {
    const longest = Math.max(...heldOut.map((text) => model.tokenize(`${text.turns[0]!.thought}\n${text.turns[0]!.answer}`).length));
    return Math.min(limit, Math.max(64, Math.ceil(longest * 1.25) + 16));
}

function toPrompt(user: string): CalibrationPrompt {
    return {user};
}

/** A short hex key of the settings a work folder's content depends on. */
function hashOf(settings: object): string {
    return createHash("sha256").update(JSON.stringify(settings)).digest("hex").slice(0, 16);
}

/** The seconds earlier runs spent on the job's thinking (and its trainings), and the losses of the candidates kept. */
async function readJob(work: string, trainDir: string): Promise<{seconds: number; trainLoss?: number[][]}> {
    const read = async <T>(file: string): Promise<Partial<T>> =>
        JSON.parse(await fs.readFile(file, "utf8").catch(() => "{}")) as Partial<T>;
    try {
        const job = await read<{seconds: number}>(path.join(work, "job.json"));
        const train = await read<{trainLoss: number[][]}>(path.join(trainDir, "train.json"));
        return {seconds: job.seconds ?? 0, trainLoss: train.trainLoss};
    } catch {
        return {seconds: 0};
    }
}

/**
 * Seconds to train on as many samples as one prompt's (`sample`) times the prompts: about 4 x layers x width x hidden
 * multiply-adds per sample and epoch (forward and the first layer's gradient) at about 1.5e9 a second (measured here).
 */
function trainingEstimate(sample: CalibrationDataset, settings: CalibrationSettings): number {
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
