// Checks that llama.cpp (through node-llama-cpp) sees the exported model exactly as PyTorch does:
// 1. tokenization: model.tokenize(text, true) of each reference text equals the training token ids;
// 2. chat template: the context node-llama-cpp renders for [user] (+ generation prompt) tokenizes to the ids of the
//    training prompt;
// 3. logits: the next-token logits after the prompt (and after a prefix of the thinking) match PyTorch's.
//
// Usage (normally run by verify.py): npx tsx test/eval/train/compareLlamaCpp.ts <reference.json> <model.gguf>

import {readFile} from "node:fs/promises";
import {getLlama, resolveChatWrapper} from "node-llama-cpp";
import {compareLogits} from "./logitChecks.js";

type Reference = {
    texts: Array<{text: string; ids: number[]}>;
    question: string;
    promptIds: number[];
    logitChecks: Array<{ids: number[]; logits: number[]}>;
};

const [refPath, modelPath] = process.argv.slice(2);
if (refPath == null || modelPath == null) throw new Error("usage: compareLlamaCpp.ts <reference.json> <model.gguf>");
const ref = JSON.parse(await readFile(refPath, "utf8")) as Reference;

const llama = await getLlama({gpu: false, build: "never", logLevel: "error" as never});
const model = await llama.loadModel({modelPath});
const result: Record<string, unknown> = {};

let tokenMismatches = 0;
for (const {text, ids} of ref.texts) {
    const got = model.tokenize(text, true);
    if (got.length !== ids.length || got.some((t, i) => t !== ids[i])) {
        tokenMismatches++;
        const at = got.findIndex((t, i) => t !== ids[i]);
        console.error(
            `tokenization mismatch at ${at}: llama.cpp ${JSON.stringify(got.slice(Math.max(0, at - 3), at + 5))}, ` +
                `training ${JSON.stringify(ids.slice(Math.max(0, at - 3), at + 5))}`
        );
    }
    const back = model.detokenize(got, true);
    if (back !== text) {
        tokenMismatches++;
        console.error(`detokenize mismatch: ${JSON.stringify(back.slice(0, 80))} vs ${JSON.stringify(text.slice(0, 80))}`);
    }
}
result.tokenization = tokenMismatches === 0 ? `ok (${ref.texts.length} texts)` : `${tokenMismatches} MISMATCHES`;

const wrapper = resolveChatWrapper(model);
const {contextText} = wrapper.generateContextState({
    chatHistory: [
        {type: "user", text: ref.question},
        {type: "model", response: []}
    ]
});
// node-llama-cpp renders the history up to "<|im_start|>assistant\n" and opens the thought segment itself
// (prefix "<think>\n", openOnResponseStart) when generation starts.
const segmentPrefix = wrapper.settings.segments?.thought?.prefix;
const prefixText = segmentPrefix == null ? "" : typeof segmentPrefix === "string" ? segmentPrefix : segmentPrefix.toString();
const rendered = [...contextText.tokenize(model.tokenizer), ...model.tokenize(prefixText, true)];
const templateOk = rendered.length === ref.promptIds.length && rendered.every((t, i) => t === ref.promptIds[i]);
result.chatWrapper = wrapper.wrapperName;
result.thoughtSegment = wrapper.settings.segments?.thought ?? null;
result.template = templateOk ? "ok" : "MISMATCH";
if (!templateOk) console.error("rendered context:", JSON.stringify(contextText.toString()));

const context = await model.createContext({contextSize: 4096, sequences: ref.logitChecks.length});
const checks = await compareLogits(context, ref.logitChecks);
result.logits = checks;
console.log(JSON.stringify(result, null, 1));
await context.dispose();
await model.dispose();
await llama.dispose();
