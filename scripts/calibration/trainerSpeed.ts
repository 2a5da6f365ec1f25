// Seconds per 1,000 calibration tokens and peak memory of the gate trainer (main/engine/calibration/trainGates.ts) on
// a model's dimensions, with random inputs and horizons:
//
//   npx tsx scripts/calibration/trainerSpeed.ts [--layers 28] [--width 1536] [--kv-heads 2] [--hidden 128] [--tokens 1000] [--epochs 1]
import {parseArgs} from "node:util";
import {mulberry32} from "../../main/shared/mulberry32.js";
import {trainGates} from "../../main/engine/calibration/trainGates.js";

const {values} = parseArgs({
    options: {
        layers: {type: "string", default: "28"},
        width: {type: "string", default: "1536"},
        "kv-heads": {type: "string", default: "2"},
        hidden: {type: "string", default: "128"},
        tokens: {type: "string", default: "1000"},
        epochs: {type: "string", default: "1"}
    }
});
const layers = Number(values.layers);
const width = Number(values.width);
const kvHeads = Number(values["kv-heads"]);
const count = Number(values.tokens);
const epochs = Number(values.epochs);
const random = mulberry32(1);
const features = Float32Array.from({length: count * layers * width}, () => random.uniform() * 2 - 1);
const horizons = Float32Array.from({length: count * layers * kvHeads}, () => Math.floor(random.uniform() ** 3 * 200));
const followers = Int32Array.from({length: count}, () => 4096);
const before = process.memoryUsage();
const report = await trainGates(
    {layers, embeddingLength: width, headCountKv: kvHeads, tokens: count, features, horizons, followers},
    {hidden: Number(values.hidden), epochs}
);
const perThousand = report.seconds / epochs / (count / 1000);
console.log(
    JSON.stringify({
        layers,
        width,
        kvHeads,
        hidden: Number(values.hidden),
        tokens: count,
        epochs,
        seconds: Number(report.seconds.toFixed(2)),
        secondsPerThousandTokensPerEpoch: Number(perThousand.toFixed(2)),
        dataMiB: Number(((features.byteLength + horizons.byteLength) / 2 ** 20).toFixed(1)),
        rssMiBBefore: Math.round(before.rss / 2 ** 20),
        peakRssMiB: Math.round(process.resourceUsage().maxRSS / 1024)
    })
);
