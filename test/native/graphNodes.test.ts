// Scoring (and the read horizons) off cost nothing: the compute graph has the same nodes as before they were ever turned on.
// llama.cpp logs the node count of the graph it reserves (at context creation, and after a scoring change).
// node-llama-cpp delivers native log lines asynchronously, so each step waits for its line to arrive.
import {expect, test} from "vitest";
import {LlamaLogLevel} from "node-llama-cpp";
import {getFixtureModel} from "../fixtures/gguf/fixtures.js";
import {loadPatchedLlama} from "../../main/engine/native/loadPatchedLlama.js";
import {NativeKv} from "../../main/engine/native/NativeKv.js";
import {evaluateForLogits, randomTokens} from "./nativeTestUtils.js";

test("scoring adds graph nodes only while it is on", async () => {
    const nodeCounts: number[] = [];
    async function nextCount(seen: number): Promise<number> {
        for (const deadline = Date.now() + 10_000; nodeCounts.length <= seen && Date.now() < deadline;)
            await new Promise((resolve) => setTimeout(resolve, 10));
        expect(nodeCounts.length, "llama.cpp logged no graph reservation").toBeGreaterThan(seen);
        return nodeCounts.at(-1)!;
    }
    const llama = await loadPatchedLlama({
        gpu: false,
        logLevel: "info",
        llamaOptions: {
            logger(level, message) {
                const match = /graph(?: \([^)]*\))?: nodes = (\d+)/.exec(message);
                if (match != null && level !== LlamaLogLevel.debug) nodeCounts.push(Number(match[1]));
            }
        }
    });
    try {
        const model = await llama.loadModel({modelPath: await getFixtureModel("tiny-qwen2")});
        const context = await model.createContext({contextSize: 256, flashAttention: false});
        const kv = new NativeKv(context);
        const sequence = context.getSequence();
        try {
            const off = await nextCount(0);

            let seen = nodeCounts.length;
            await kv.configureScoring({enabled: true});
            await evaluateForLogits(sequence, randomTokens(4, 1));
            const on = await nextCount(seen);
            expect(on).toBeGreaterThan(off);

            seen = nodeCounts.length;
            await kv.configureScoring({enabled: false});
            await evaluateForLogits(sequence, randomTokens(4, 2));
            expect(await nextCount(seen)).toBe(off);

            // the read horizons likewise (native/patches 0012); the attn_norm capture adds outputs, not nodes
            seen = nodeCounts.length;
            await kv.configureReadHorizon(0.5);
            await evaluateForLogits(sequence, randomTokens(4, 3));
            expect(await nextCount(seen)).toBeGreaterThan(off);

            seen = nodeCounts.length;
            await kv.configureReadHorizon(null);
            await kv.configureNormCapture(true);
            await evaluateForLogits(sequence, randomTokens(4, 4));
            expect(await nextCount(seen)).toBe(off);
        } finally {
            await kv.dispose();
            await context.dispose();
            await model.dispose();
        }
    } finally {
        await llama.dispose();
    }
});
