// Compares llama.cpp's next-token logits (through node-llama-cpp) with the PyTorch replica's, for train.py
// --check-llama-cpp. Prints {"checks": [{tokens, maxAbsDiff, maxLogit, sameArgmax}]} as JSON.
//
// Usage (normally run by scripts/retention/train.py): npx tsx scripts/retention/checkLogits.ts <reference.json> <model.gguf>
// reference.json: {"checks": [{"ids": number[], "logits": number[]}]} (the logits after the last id).

import {readFile} from "node:fs/promises";
import {getLlama, type Token} from "node-llama-cpp";

type Reference = {checks: Array<{ids: number[], logits: number[]}>};

const [refPath, modelPath] = process.argv.slice(2);
if (refPath == null || modelPath == null)
    throw new Error("usage: checkLogits.ts <reference.json> <model.gguf>");
const ref = JSON.parse(await readFile(refPath, "utf8")) as Reference;
const longest = Math.max(...ref.checks.map((c) => c.ids.length));

const llama = await getLlama({gpu: false, build: "never", logLevel: "error" as never});
const model = await llama.loadModel({modelPath});
const context = await model.createContext({contextSize: Math.max(256, longest + 16), sequences: ref.checks.length});
const checks: Array<{tokens: number, maxAbsDiff: number, maxLogit: number, sameArgmax: boolean}> = [];
for (const {ids, logits} of ref.checks) {
    const sequence = context.getSequence();
    const input = ids.map((t, i) => (i === ids.length - 1 ? [t as Token, {generateNext: {logits: true}}] as const : t as Token));
    const evaluated = await sequence.controlledEvaluate(input as never);
    const got = evaluated.at(-1)?.next?.logits;
    if (got == null)
        throw new Error("no logits returned");
    let maxAbsDiff = 0;
    let argmax = 0;
    for (let t = 0; t < logits.length; t++) {
        const value = got.get(t as Token) ?? NaN;
        maxAbsDiff = Math.max(maxAbsDiff, Math.abs(value - logits[t]!));
        if (value > (got.get(argmax as Token) ?? -Infinity))
            argmax = t;
    }
    const refArgmax = logits.indexOf(Math.max(...logits));
    checks.push({tokens: ids.length, maxAbsDiff, maxLogit: Math.max(...logits.map(Math.abs)), sameArgmax: argmax === refArgmax});
    sequence.dispose();
}
console.log(JSON.stringify({checks}));
await context.dispose();
await model.dispose();
await llama.dispose();
