// How well gates fitted to a calibration's data would keep what the model reads, without running the model: the
// prompts thought by a calibration job (its work folder's prompt-*.cal, kept while the job runs or after it is
// cancelled) are split into training texts and held-out ones, gates are fitted to the first with the given trainer
// options, and on the held-out texts a cache pruned every 8 tokens by the gates' ranking (TRIM-KV's shared maximum) is
// replayed up to the end of the thought, counting the tokens it frees that the model reads again later (a horizon that
// reaches past the round that freed them):
//
//   npx tsx scripts/calibration/simulateGates.ts --data <work folder>/<job> [--held-out 12] [--alternative 0]
//       [--options '{"horizonWeight":1}']
//
// `--alternative k` fits to the k-th other read threshold's labels (`CalibrationDataset.alternatives`), and counts the
// reads at that threshold. Prints, per share of the cells, the held-out thoughts that lost no token read later, and the
// gates' error in log e-folding age by horizon.
import fs from "node:fs/promises";
import path from "node:path";
import {parseArgs} from "node:util";
import {concatDatasets, readDatasetFile} from "../../main/engine/calibration/datasetFile.js";
import {gateLogits, trainGates} from "../../main/engine/calibration/trainGates.js";
import type {CalibrationDataset, TrainGatesOptions} from "../../main/engine/calibration/types.js";

const {values} = parseArgs({
    options: {
        data: {type: "string"},
        "held-out": {type: "string", default: "12"},
        alternative: {type: "string"},
        options: {type: "string", default: "{}"}
    }
});
if (values.data == null) {
    console.error("error: --data <a calibration job's work folder> is required");
    process.exit(1);
}
const files = (await fs.readdir(values.data)).filter((name) => name.endsWith(".cal")).sort();
let data = concatDatasets(await Promise.all(files.map((name) => readDatasetFile(path.join(values.data!, name)))));
if (values.alternative != null) {
    const alternative = data.alternatives?.[Number(values.alternative)];
    if (alternative == null) throw new Error(`the data has no alternative ${values.alternative}`);
    data = {...data, readThreshold: alternative.readThreshold, horizons: alternative.horizons};
}
const heldOut = Number(values["held-out"]);
const firstHeldOut = data.texts.length - heldOut;
if (!(heldOut >= 1 && firstHeldOut >= 1)) throw new Error(`--held-out must leave texts to train on (${data.texts.length} texts)`);

/** The samples whose text is kept by `keep`, as a dataset of their own. */
function subset(all: CalibrationDataset, keep: (text: number) => boolean): CalibrationDataset {
    const rows = Array.from({length: all.tokens}, (_, i) => i).filter((i) => keep(all.text[i]!));
    const feature = all.layers * all.embeddingLength;
    const label = all.layers * all.headCountKv;
    const features = new Float32Array(rows.length * feature);
    const horizons = new Float32Array(rows.length * label);
    rows.forEach((i, r) => {
        features.set(all.features.subarray(i * feature, (i + 1) * feature), r * feature);
        horizons.set(all.horizons.subarray(i * label, (i + 1) * label), r * label);
    });
    const pick = <T extends Int32Array | Uint8Array>(array: T): T => array.filter((_, i) => keep(all.text[i]!)) as T;
    return {
        ...all,
        tokens: rows.length,
        features,
        horizons,
        followers: pick(all.followers),
        positions: pick(all.positions),
        text: pick(all.text),
        tokenIds: pick(all.tokenIds),
        generated: pick(all.generated),
        alternatives: []
    };
}

const options = JSON.parse(values.options) as TrainGatesOptions;
const report = await trainGates(
    subset(data, (text) => text < firstHeldOut),
    {epochs: 8, ...options}
);
console.log(`trained in ${report.seconds.toFixed(1)} s; loss per layer ${report.loss.map((l) => l.toFixed(3)).join(" ")}`);

// Per sample, the gates' shared log beta (the max over layers and heads) and its longest horizon.
const {layers, embeddingLength: width, headCountKv: heads} = data;
const logBeta = new Float64Array(data.tokens).fill(-Infinity);
const horizon = new Float64Array(data.tokens);
for (let layer = 0; layer < layers; layer++) {
    const x = new Float32Array(data.tokens * width);
    for (let i = 0; i < data.tokens; i++)
        x.set(data.features.subarray((i * layers + layer) * width, (i * layers + layer + 1) * width), i * width);
    const g = gateLogits(report.gates.gates[layer]!, x, width);
    for (let i = 0; i < data.tokens; i++) {
        for (let h = 0; h < heads; h++) {
            const logit = g[i * heads + h]!;
            const value = logit >= 0 ? -Math.log1p(Math.exp(-logit)) : logit - Math.log1p(Math.exp(logit));
            logBeta[i] = Math.max(logBeta[i]!, value);
            horizon[i] = Math.max(horizon[i]!, data.horizons[(i * layers + layer) * heads + h]!);
        }
    }
}

for (const share of [0.25, 0.5]) {
    let clean = 0;
    let lost = 0;
    for (let t = firstHeldOut; t < data.texts.length; t++) {
        const text = data.texts[t]!;
        const n = text.tokens.length;
        const beta = new Float64Array(n).fill(Number.NaN);
        const read = new Float64Array(n);
        for (let i = 0; i < data.tokens; i++) {
            if (data.text[i] !== t) continue;
            beta[data.positions[i]!] = logBeta[i]!;
            read[data.positions[i]!] = horizon[i]!;
        }
        const budget = Math.max(32, Math.round(n * share));
        const live = new Set<number>();
        let misses = 0;
        for (let p = 0; p < n; p++) {
            live.add(p);
            if (live.size <= budget || p % 8 !== 0) continue;
            // tokens not sampled rank lowest
            const ranked = [...live]
                .map((q) => [q, Number.isNaN(beta[q]!) ? -Infinity : (p - q) * beta[q]!] as const)
                .sort((a, b) => b[1] - a[1]);
            live.clear();
            for (const [q] of ranked.slice(0, budget)) live.add(q);
            for (const [q] of ranked.slice(budget)) if (q + read[q]! > p) misses++;
        }
        lost += misses;
        if (misses === 0) clean++;
    }
    console.log(
        `${Math.round(share * 100)}% of the cells: ${clean} of ${heldOut} held-out thoughts lose no token read later; ${lost} such tokens freed`
    );
}

const bounds = [0, 4, 16, 64, 256, Infinity];
for (let b = 0; b + 1 < bounds.length; b++) {
    let n = 0;
    let sum = 0;
    for (let i = 0; i < data.tokens; i++) {
        if (data.text[i]! < firstHeldOut || horizon[i]! < bounds[b]! || horizon[i]! >= bounds[b + 1]!) continue;
        sum += Math.log(-1 / logBeta[i]!) - Math.log1p(horizon[i]!);
        n++;
    }
    console.log(
        `horizon in [${bounds[b]}, ${bounds[b + 1]}): ${n} tokens, mean error of the log e-folding age ${n > 0 ? (sum / n).toFixed(2) : "-"}`
    );
}
