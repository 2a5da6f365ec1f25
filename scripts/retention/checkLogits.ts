// Compares llama.cpp's next-token logits (through node-llama-cpp) with the PyTorch replica's, for train.py
// --check-llama-cpp. Prints {"checks": [{tokens, maxAbsDiff, maxLogit, sameArgmax}]} as JSON.
//
// Usage (normally run by scripts/retention/train.py): npx tsx scripts/retention/checkLogits.ts <reference.json> <model.gguf>
// reference.json: {"checks": [{"ids": number[], "logits": number[]}]} (the logits after the last id).

import {readFile} from "node:fs/promises";
import {getLlama} from "node-llama-cpp";
import {compareLogits} from "../../test/eval/train/logitChecks.js";

type Reference = {checks: Array<{ids: number[]; logits: number[]}>};

const [refPath, modelPath] = process.argv.slice(2);
if (refPath == null || modelPath == null) throw new Error("usage: checkLogits.ts <reference.json> <model.gguf>");
const ref = JSON.parse(await readFile(refPath, "utf8")) as Reference;
const longest = Math.max(...ref.checks.map((c) => c.ids.length));

const llama = await getLlama({gpu: false, build: "never", logLevel: "error" as never});
const model = await llama.loadModel({modelPath});
const context = await model.createContext({contextSize: Math.max(256, longest + 16), sequences: ref.checks.length});
const checks = await compareLogits(context, ref.checks);
console.log(JSON.stringify({checks}));
await context.dispose();
await model.dispose();
await llama.dispose();
