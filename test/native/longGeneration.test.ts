// A generation several times longer than the KV cache, evicting as it goes: the cache never grows past its cells,
// tokens keep coming, positions keep growing, and reused cells start from a zero score.
import {afterAll, beforeAll, expect, test} from "vitest";
import type {ControlledEvaluateInputItem, LlamaModel, Token} from "node-llama-cpp";
import {createTestContext, loadTestModel, randomTokens} from "./nativeTestUtils.js";

let model: LlamaModel;

beforeAll(async () => {
    model = await loadTestModel("gqa");
});

afterAll(async () => {
    await model?.dispose();
});

test("generating 4x the context's cells with eviction stays within the allocated cells", async () => {
    const t = await createTestContext(model, {contextSize: 256});
    try {
        const {cellsAllocated} = await t.kv.stats();
        expect(cellsAllocated).toBe(256);
        const budget = cellsAllocated - 16;
        const sinks = 4;
        const toGenerate = 4 * cellsAllocated + 64;

        t.kv.setPositionLimit(16 * cellsAllocated);
        await t.kv.configureScoring({enabled: true, gamma: 0.95});

        const specialTokens = new Set([model.tokens.bos, model.tokens.eos, model.tokens.eot].filter((token) => token != null));
        let input: Token[] = randomTokens(32, 11);
        let generated = 0;
        let reusedCellsChecked = 0;
        let maxUsed = 0;

        while (generated < toGenerate) {
            const items: ControlledEvaluateInputItem[] = input.map((token, index) =>
                index === input.length - 1 ? [token, {generateNext: {token: true}}] : token
            );
            const outputs = await t.sequence.controlledEvaluate(items);
            const token = outputs[input.length - 1]?.next.token;
            expect(token).toBeTypeOf("number");
            generated++;
            // keep the chain going: a special token (end of turn) is replaced by an ordinary one
            input = [token == null || specialTokens.has(token) ? randomTokens(1, generated)[0]! : token];

            const {cellsUsed} = await t.kv.stats();
            maxUsed = Math.max(maxUsed, cellsUsed);
            expect(cellsUsed).toBeLessThanOrEqual(cellsAllocated);

            const snapshot = await t.kv.scores(0);
            const newest = t.sequence.nextTokenIndex - 1;
            const newestIndex = snapshot.positions.indexOf(newest);
            expect(newestIndex).toBeGreaterThanOrEqual(0);
            if (t.sequence.nextTokenIndex > cellsAllocated) {
                // every cell has been used before: the newest token sits in a reused cell, whose scores restarted at 0
                const n = snapshot.positions.length;
                for (const layer of snapshot.layers) {
                    for (let h = 0; h < layer.heads; h++)
                        expect(layer.accumulated[h * n + newestIndex]).toBe(layer.last[h * n + newestIndex]);
                }
                reusedCellsChecked++;
            }

            if (cellsUsed >= budget) {
                // evict the oldest tokens after the sinks, 32 at a time, never the newest
                const live = Array.from(snapshot.positions).sort((a, b) => a - b);
                const victims = live.filter((pos) => pos >= sinks && pos !== newest).slice(0, 32);
                expect(await t.kv.evict(0, victims)).toBe(victims.length);
            }
        }

        const stats = await t.kv.stats();
        expect(generated).toBeGreaterThanOrEqual(4 * cellsAllocated);
        expect(t.sequence.nextTokenIndex).toBe(32 + generated - 1);
        expect(maxUsed).toBeLessThanOrEqual(cellsAllocated);
        expect(stats.tokensEvicted).toBeGreaterThan(3 * cellsAllocated);
        expect(reusedCellsChecked).toBeGreaterThan(2 * cellsAllocated);
    } finally {
        await t.dispose();
    }
});
