// What a calibration costs by writing its texts and by reading them: the model writes each prompt's thought with Full
// KV (collectCalibrationData), then the same texts are read at prompt speed (readCalibrationData), both recording the
// gate inputs and the read horizons at two thresholds, as a calibration does. Prints seconds per 1,000 tokens of each
// and their ratio, in one run:
//
//   npx tsx scripts/calibration/readingSpeed.ts --model <file.gguf> [--prompts 4] [--max-tokens 512] [--prompt-set demo|merge|english] [--threads 2]
import path from "node:path";
import {parseArgs} from "node:util";
import {resolveChatWrapper, type Token} from "node-llama-cpp";
import {collectCalibrationData} from "../../main/engine/calibration/collectCalibrationData.js";
import {calibrationPrompts, type PromptSet} from "../../main/engine/calibration/prompts.js";
import {readCalibrationData} from "../../main/engine/calibration/readCalibrationData.js";
import {loadPatchedLlama} from "../../main/engine/native/loadPatchedLlama.js";
import {NativeKv} from "../../main/engine/native/NativeKv.js";

const {values} = parseArgs({
    options: {
        model: {type: "string"},
        prompts: {type: "string", default: "4"},
        "max-tokens": {type: "string", default: "512"},
        "prompt-set": {type: "string", default: "english"},
        threads: {type: "string", default: "2"}
    }
});
if (values.model == null) {
    console.error("error: --model <file.gguf> is required");
    process.exit(1);
}
const count = Number(values.prompts);
const maxTokens = Number(values["max-tokens"]);
const threads = Number(values.threads);
const set = values["prompt-set"] as PromptSet;
const llama = await loadPatchedLlama({gpu: false, logLevel: "error"});
const model = await llama.loadModel({modelPath: path.resolve(values.model)});
const prompts = calibrationPrompts(set, count, 0).map((prompt) => ({user: prompt.user}));
const context = await model.createContext({contextSize: 4096, flashAttention: false, threads, sequences: 1});
const kv = new NativeKv(context);
const engine = {model, chatWrapper: resolveChatWrapper(model), sequence: context.getSequence(), kv};
const options = {maxSamples: 4096, moreReadThresholds: [0.25], seed: 1};
try {
    let t0 = performance.now();
    const written = await collectCalibrationData(engine, prompts, {...options, maxTokens});
    const writeSeconds = (performance.now() - t0) / 1000;
    const texts = written.texts.map((text) => ({tokens: Array.from(text.tokens) as Token[], promptTokens: text.promptTokens}));
    t0 = performance.now();
    const read = await readCalibrationData(engine, texts, options);
    const readSeconds = (performance.now() - t0) / 1000;
    const tokens = written.tokensSeen;
    console.log(
        JSON.stringify({
            model: path.basename(values.model),
            texts: written.texts.length,
            tokens,
            generated: written.texts.reduce((sum, text) => sum + text.generatedTokens, 0),
            writeSecondsPer1000: +((writeSeconds / tokens) * 1000).toFixed(3),
            readSecondsPer1000: +((readSeconds / read.tokensSeen) * 1000).toFixed(3),
            readingFaster: +(writeSeconds / readSeconds).toFixed(1),
            threads
        })
    );
} finally {
    await kv.dispose();
    await context.dispose();
    await model.dispose();
}
