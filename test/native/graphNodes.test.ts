// Scoring off costs nothing: the compute graph has the same nodes as before scoring was ever turned on.
// llama.cpp logs the node count of the graph it reserves (at context creation, and after a scoring change).
import {expect, test} from "vitest";
import {LlamaLogLevel} from "node-llama-cpp";
import {getFixtureModel} from "../fixtures/gguf/fixtures.js";
import {loadPatchedLlama} from "../../main/engine/native/loadPatchedLlama.js";
import {NativeKv} from "../../main/engine/native/NativeKv.js";
import {evaluateForLogits, randomTokens} from "./nativeTestUtils.js";

test("scoring adds graph nodes only while it is on", async () => {
    const nodeCounts: number[] = [];
    const llama = await loadPatchedLlama({
        gpu: false,
        logLevel: "info",
        llamaOptions: {
            logger(level, message) {
                const match = /graph(?: \([^)]*\))?: nodes = (\d+)/.exec(message);
                if (match != null && level !== LlamaLogLevel.debug)
                    nodeCounts.push(Number(match[1]));
            }
        }
    });
    try {
        const model = await llama.loadModel({modelPath: await getFixtureModel("tiny-qwen2")});
        const context = await model.createContext({contextSize: 256, flashAttention: false});
        const kv = new NativeKv(context);
        const sequence = context.getSequence();
        try {
            expect(nodeCounts.length).toBeGreaterThan(0);
            const off = nodeCounts.at(-1)!;

            await kv.configureScoring({enabled: true});
            await evaluateForLogits(sequence, randomTokens(4, 1));
            const on = nodeCounts.at(-1)!;
            expect(on).toBeGreaterThan(off);

            await kv.configureScoring({enabled: false});
            await evaluateForLogits(sequence, randomTokens(4, 2));
            expect(nodeCounts.at(-1)).toBe(off);
        } finally {
            await kv.dispose();
            await context.dispose();
            await model.dispose();
        }
    } finally {
        await llama.dispose();
    }
});
