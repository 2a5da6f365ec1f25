// One sampled generation of the engine tests that run a policy over a long thought: its result, the memory samples it
// emitted and the tokens it wrote.
import type {CompressionSettings, KvSample} from "../../preload/contract.js";
import type {Engine} from "../../main/engine/runtime/Engine.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";

/** "Think for a long time.", temperature 0.8, seed 5, rounds every 16 tokens, under `compression` at `cells`. */
export async function generateRun(engine: Engine, compression: Partial<CompressionSettings>, cells: number, maxTokens: number) {
    const samples: KvSample[] = [];
    let tokens = 0;
    const result = await engine.generate({
        history: [{role: "user", text: "Think for a long time."}],
        systemPrompt: "",
        temperature: 0.8,
        maxTokens,
        seed: 5,
        signal: new AbortController().signal,
        kv: {compression: {...defaultCompressionSettings, pruneEvery: 16, ...compression}, cells},
        onChunk: (chunk) => void (tokens += chunk.tokens),
        onSample: (sample) => void samples.push(sample)
    });
    return {result, samples, tokens, last: samples.at(-1)!};
}
