import fs from "node:fs/promises";
import path from "node:path";
import {readGatesFile, writeGatesFile} from "./gatesFile.js";
import {trainGates, type TrainedGates} from "./trainGates.js";
import type {CalibrationDataset} from "./types.js";
import {calibrationProvenance, writeCalibratedSidecar, type CalibrationSettings} from "./writeCalibratedSidecar.js";

/**
 * What one candidate is fitted to: the labels read at `readThreshold` (`horizons`: 0 for the dataset's own, k for its
 * k-th alternative) under the loss weight (1 + horizon)^`horizonWeight`.
 */
export type CandidateKind = {readThreshold: number; horizons: number; horizonWeight: number};

/**
 * One candidate per kind, trained on `dataset` (`trainGates`, with the width, epochs and seed of `made`) and kept in
 * `trainDir`: its gates and its sidecar, with the provenance of `made` and `prompts`. A resumed job whose candidates are
 * all there (`keptLoss`, their losses from train.json, says it trained them) reads them back instead; `trainedNow` says
 * whether they were trained in this run. `validationSeconds` is the validation's estimate, added to the training's
 * remaining seconds in the progress.
 */
export async function trainCandidates(
    job: {modelPath: string; signal?: AbortSignal},
    dataset: CalibrationDataset,
    kinds: CandidateKind[],
    trainDir: string,
    made: CalibrationSettings,
    prompts: number,
    keptLoss: number[][] | undefined,
    report: {progress: (done: number, total: number, remaining: number) => void; log: (line: string) => void; validationSeconds: number}
): Promise<{candidates: string[]; trained: TrainedGates[]; trainLoss: number[][]; trainedNow: boolean}> {
    const {hidden, epochs, horizonWeights} = made;
    const candidates = kinds.map((_, k) => path.join(trainDir, `candidate-${k}.retention.gguf`));
    const gatesFiles = kinds.map((_, k) => path.join(trainDir, `gates-${k}.f32`));
    let trainLoss: number[][] = keptLoss ?? [];
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
    if (trained != null && !candidatesKept.includes(false)) return {candidates, trained, trainLoss, trainedNow: false};

    const t0 = performance.now();
    trained = [];
    trainLoss = [];
    for (const [k, {readThreshold, horizons, horizonWeight}] of kinds.entries()) {
        const labels = horizons === 0 ? dataset : {...dataset, readThreshold, horizons: dataset.alternatives![horizons - 1]!.horizons};
        const trainReport = await trainGates(labels, {
            hidden,
            epochs,
            horizonWeight,
            seed: made.seed + 1,
            signal: job.signal,
            onProgress: (p) => {
                const done = (k * p.layers + p.layer) * p.epochs + p.epoch;
                const total = kinds.length * p.layers * p.epochs;
                const seconds = (performance.now() - t0) / 1000;
                report.progress(done, total, (seconds / done) * (total - done) + report.validationSeconds);
            }
        });
        trained.push(trainReport.gates);
        trainLoss.push(trainReport.loss);
        await writeGatesFile(gatesFiles[k]!, trainReport.gates);
        report.log(
            `trained ${dataset.layers} layers on ${dataset.tokens} tokens read at ${readThreshold}, weighed by horizon^${horizonWeight}, in ${trainReport.seconds.toFixed(1)} s; horizon loss per layer ${trainReport.loss.map((l) => l.toFixed(3)).join(", ")}`
        );
        await writeCalibratedSidecar(
            candidates[k]!,
            job.modelPath,
            trainReport.gates,
            made,
            calibrationProvenance(made, prompts, dataset, kinds[k]!, 0, null)
        );
    }
    await fs.writeFile(path.join(trainDir, "train.json"), JSON.stringify({hidden, epochs, horizonWeights, trainLoss}));
    return {candidates, trained, trainLoss, trainedNow: true};
}
