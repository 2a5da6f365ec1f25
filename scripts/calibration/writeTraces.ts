// A trace file of a model's own answers: the model answers each prompt greedily with Full KV (thinking on) and each
// question, thought and answer is written as one JSON line {"prompt", "response"}, the thought inside <think>, as
// `npm run calibrate -- --traces` reads them. For measuring a calibration from written text on the task models:
//
//   npx tsx scripts/calibration/writeTraces.ts --model <file.gguf> --prompt-set demo|merge|multi|english --count 56 --out traces.jsonl
//       [--seed 0] [--max-tokens 3000] [--threads 2] [--families sum,chase] [--prompts-only]
//
// --families (with --prompt-set multi) keeps the many-task model's problems to those families; --prompts-only writes the
// questions alone, {"prompt"} a line, as `npm run calibrate -- --prompts-file` reads them, and loads no model.
import fs from "node:fs/promises";
import path from "node:path";
import {parseArgs} from "node:util";
import {calibrationPrompts, multiTaskPrompts, type PromptSet} from "../../main/engine/calibration/prompts.js";
import {MULTI_FAMILIES, type MultiFamily} from "../../main/demo/multiTask.js";
import {loadPatchedLlama} from "../../main/engine/native/loadPatchedLlama.js";
import {answerPrompts} from "./answerPrompts.js";

const {values} = parseArgs({
    options: {
        model: {type: "string"},
        "prompt-set": {type: "string", default: "demo"},
        count: {type: "string", default: "56"},
        seed: {type: "string", default: "0"},
        "max-tokens": {type: "string", default: "3000"},
        threads: {type: "string", default: "2"},
        families: {type: "string"},
        "prompts-only": {type: "boolean", default: false},
        out: {type: "string"}
    }
});
function fail(message: string): never {
    console.error(`error: ${message}`);
    process.exit(1);
}
if (values.out == null) fail("--out <traces.jsonl> is required");
const families = values.families?.split(",") as MultiFamily[] | undefined;
if (families != null && values["prompt-set"] !== "multi") fail("--families goes with --prompt-set multi");
if (families?.some((family) => !MULTI_FAMILIES.includes(family))) fail(`--families takes ${MULTI_FAMILIES.join(", ")}`);
const count = Number(values.count);
const seed = Number(values.seed);
const prompts =
    families == null ? calibrationPrompts(values["prompt-set"] as PromptSet, count, seed) : multiTaskPrompts(count, seed, false, families);
if (values["prompts-only"]) {
    await fs.writeFile(values.out, prompts.map((prompt) => JSON.stringify({prompt: prompt.user})).join("\n") + "\n");
    process.exit(0);
}
if (values.model == null) fail("--model <file.gguf> is required (or --prompts-only)");
const llama = await loadPatchedLlama({gpu: false, logLevel: "error"});
const model = await llama.loadModel({modelPath: path.resolve(values.model)});
let texts;
try {
    texts = await answerPrompts(
        model,
        prompts.map((prompt) => prompt.user),
        {
            maxTokens: Number(values["max-tokens"]),
            threads: Number(values.threads),
            onAnswer: (index, tokens, stop) => console.error(`${index + 1}/${prompts.length}: ${tokens} tokens (${stop})`)
        }
    );
} finally {
    await model.dispose();
}
const lines = texts.map(({turns: [turn]}) =>
    JSON.stringify({prompt: turn!.user, response: `<think>\n${turn!.thought}\n</think>\n\n${turn!.answer}`})
);
await fs.writeFile(values.out, lines.join("\n") + "\n");
