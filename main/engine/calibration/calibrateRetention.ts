import {createHash} from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import {retentionSidecarPath} from "../retention/findRetentionGates.js";
import {modelFingerprint} from "../retention/modelFingerprint.js";
import {concatDatasets, readDatasetFile} from "./datasetFile.js";
import {jobPrompts} from "./jobPrompts.js";
import {jobSettings} from "./jobSettings.js";
import type {PromptSet} from "./prompts.js";
import {readWrittenTexts} from "./readWrittenTexts.js";
import {thinkPrompts} from "./thinkPrompts.js";
import {trainCandidates} from "./trainCandidates.js";
import type {CalibrationDataset, ValidationReport, CalibrateRetentionOptions, CalibrationResult, CalibrationStage} from "./types.js";
import {validateCandidates, validationScore} from "./validateCandidates.js";
import {validationTokens} from "./validationTokens.js";
import {calibrationProvenance, textLengths, writeCalibratedSidecar} from "./writeCalibratedSidecar.js";
import {writtenPrompts} from "./writtenPrompts.js";

// A model's retention gates from its own thinking: the model thinks with Full KV on calibration prompts (its read
// horizons and gate inputs recorded natively), or texts it already wrote (its conversations, a trace file) are read with
// Full KV at prompt speed (readCalibrationData), the gates are fitted to them (trainGates), measured against
// Lethe on held-out prompts (validateCandidates) and, when they do at least as well, written beside the model with their
// provenance. Each prompt's data is kept in the work folder as soon as it is thought, so a cancelled, killed or crashed
// calibration goes on from the next prompt with the same settings; the trained candidates are kept there too, apart
// per training setting, so a job that changes only how the gates are trained (width, epochs, weights) thinks nothing
// again. The read threshold that makes the labels and the weight of long horizons in the loss are chosen per model:
// one candidate is fitted per threshold and weight (each text is read again at the other thresholds,
// `collectCalibrationData`), and the validation keeps the best: which candidate wins differs between the task models
// (docs/BENCHMARKS.md, "Calibration").

/** The calibration job; see the module's comment. Rejects with the signal's reason when cancelled (the work folder stays). */
export async function calibrateRetention(options: CalibrateRetentionOptions): Promise<CalibrationResult> {
    const started = performance.now();
    const {settings, written, texts} = jobSettings(options);
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

    // Thinking (or reading): one prompt at a time, each kept on disk as soon as it is done.
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
        const read = await readWrittenTexts(options, texts, missing, files, settings, perPrompt, {
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
        const run = await thinkPrompts(options, prompts, missing, files, settings, perPrompt, {
            progress: (done, total, remaining) => progress("thinking", done, total, remaining),
            onThought: async (index, data) => {
                kept[index] = data;
                tokensSeen += data.tokensSeen;
                await saveJob();
            },
            log
        });
        thinkingSeconds = run.seconds;
        thought = run.thought;
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
    // the validation's seconds: 1 + 2 x (1 + candidates) runs per held-out prompt, each as long as a prompt's thinking
    // (10 s before one is measured)
    const validationSeconds = settings.validationPrompts * (1 + 2 * (1 + kinds.length)) * (thinkingSeconds / Math.max(1, thought) || 10);
    const {candidates, trained, trainLoss, trainedNow} = await trainCandidates(
        options,
        dataset,
        kinds,
        trainDir,
        made,
        prompts.length,
        job.trainLoss,
        {
            progress: (done, total, remaining) => progress("training", done, total, remaining),
            log,
            validationSeconds
        }
    );
    if (trainedNow) await saveJob();

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
        const keep = options.keepRefusedWork === true || options.keepWork === true;
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
    if (options.keepWork === true) await saveJob();
    else await fs.rm(work, {recursive: true, force: true});
    progress("writing", 1, 1, 0);
    return {...result, installed: true, backup, refusal: null, workKept: options.keepWork === true ? work : null, promptSet: usedSet};
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
        case "multi":
            return "Try another seed, or more prompts.";
    }
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
