// Scratch: accuracy of one policy config on held-out demo problems at a share of Full's cells.
import fs from "node:fs";
import path from "node:path";
import {parseArgs} from "node:util";
import type {PolicyId, CompressionSettings} from "../../../preload/contract.js";
import {Engine} from "../../../main/engine/Engine.js";
import {loadPatchedLlama} from "../../../main/engine/native/loadPatchedLlama.js";
import {defaultCompressionSettings} from "../../../main/services/schemas.js";
import {extractDemoAnswer, heldOutDemoProblems, isDemoAnswerCorrect} from "../../eval/demoTask.js";

const {values} = parseArgs({options: {
    policy: {type: "string", default: "lethe"}, share: {type: "string", default: "0.5"}, problems: {type: "string", default: "16"},
    combine: {type: "string", default: "quota"}, offset: {type: "string", default: "0"}, params: {type: "string", default: "{}"},
    prune: {type: "string", default: "8"}
}});
const llama = await loadPatchedLlama({gpu: "auto", logLevel: "error"});
const engine = new Engine({loadLlama: async () => ({llama, build: {kind: "local", gpu: false, patched: true, llamaCppRelease: "", seriesHash: null}}), threads: 2});
await engine.loadModel(path.resolve("resources/models/ponder-demo.gguf"), null);
const problems = heldOutDemoProblems(Number(values.problems), {}, Number(values.offset));
const cacheFile = "test/bench/scratch/full-cells.json";
const cache: Record<string, number> = fs.existsSync(cacheFile) ? JSON.parse(fs.readFileSync(cacheFile, "utf8")) : {};
async function solve(question: string, policy: PolicyId, cells: number, extra: Partial<CompressionSettings> = {}) {
    let text = "", tokens = 0, live = 0, forced = 0;
    const result = await engine.generate({
        history: [{role: "user", text: question}], systemPrompt: "", temperature: 0, maxTokens: 4096, signal: new AbortController().signal,
        kv: {compression: {...defaultCompressionSettings, policy, pruneEvery: Number(values.prune), ...extra}, cells},
        onChunk(c) { tokens += c.tokens; if (c.segment === "answer") text += c.text; },
        onSample(s) { live = Math.max(live, s.cellsLive); forced = s.forcedDrops; }
    });
    return {answer: extractDemoAnswer(text), tokens, promptTokens: result.promptTokens, live, forced};
}
let correct = 0; const started = Date.now();
const params = JSON.parse(values.params);
for (const p of problems) {
    let used = cache[p.seed];
    if (used == null) {
        const run = await solve(p.question, "full", 8192);
        used = run.promptTokens + run.tokens + 4;
        cache[p.seed] = used;
        fs.writeFileSync(cacheFile, JSON.stringify(cache));
    }
    const cells = Math.max(32, Math.round(used * Number(values.share)));
    const policy = values.policy as PolicyId;
    const compression = {combine: values.combine as CompressionSettings["combine"],
        params: {...defaultCompressionSettings.params, [policy]: {...(defaultCompressionSettings.params as any)[policy], ...params}}};
    const run = await solve(p.question, policy, cells, compression).catch((e) => ({answer: "ERR " + (e as Error).message.slice(0, 80), live: 0, forced: 0, tokens: 0}));
    const ok = isDemoAnswerCorrect(p, run.answer);
    if (ok) correct++;
    console.error(`${p.steps} steps, cells ${cells} (used ${used}), max live ${run.live}, forced ${run.forced}: ${ok ? "ok" : "WRONG " + run.answer}`);
}
console.log(`${values.policy} ${values.combine} ${values.share} ${values.params}: ${correct}/${problems.length} in ${((Date.now() - started) / 1000).toFixed(0)} s`);
await engine.dispose();
