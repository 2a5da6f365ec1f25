// H2O on per-head cells against the patched engine: on a grouped-query model (4 query heads, 2 KV heads) each KV head
// keeps its recent window and then the tokens its own two query heads gave the most attention, read from the engine's
// per-head scores; a second round, after the first moved heads between cells, ranks by the scores that moved with them.
import {afterAll, beforeAll, describe, expect, test} from "vitest";
import type {LlamaModel} from "node-llama-cpp";
import {h2oPolicy} from "../../main/engine/policies/h2o.js";
import {pruneHeadCells} from "../../main/engine/pruning/headRound.js";
import {getFixtureModelInfo} from "../fixtures/gguf/fixtures.js";
import {createTestContext, evaluateForLogits, loadTestModel, MODEL_SHAPES, randomTokens, type TestContext} from "./nativeTestUtils.js";

const params = {heavyRatio: 0.5};

/**
 * What H2O per head should keep, worked out from one score read and the table: per (layer, KV head), the tokens it holds
 * with their attention summed over the query heads `q` with `floor(q / group)` equal to the KV head; position 0 and the 8
 * newest cells, then the newest `recent` tokens it holds, then the heaviest.
 */
async function expectedKeep(t: TestContext, keep: number): Promise<string[]> {
    const scores = await t.kv.scores(0);
    const table = t.kv.existingHeadSlots(0);
    const kvHeads = t.kv.kvHeads;
    const group = scores.heads / kvHeads;
    const slots = [...scores.positions].sort((a, b) => a - b);
    const n = slots.length;
    const pinned = new Set([slots[0]!, ...slots.slice(n - 8)]);
    const recent = keep - Math.floor(keep * params.heavyRatio);
    const out: string[] = [];
    scores.layers.forEach((layer) => {
        for (let head = 0; head < kvHeads; head++) {
            const held = slots.map((slot) => {
                const k = scores.positions.indexOf(slot);
                let weight = 0;
                for (let q = head * group; q < (head + 1) * group; q++) weight += layer.accumulated[q * n + k]!;
                return {token: table?.tokenAt(slot, layer.layer, head) ?? slot, weight};
            });
            const newest = [...held].sort((a, b) => b.token - a.token).slice(0, recent);
            const first = held.filter((cell) => pinned.has(cell.token) || newest.includes(cell));
            const rest = held.filter((cell) => !first.includes(cell)).sort((a, b) => b.weight - a.weight);
            out.push(
                [...first, ...rest]
                    .slice(0, keep)
                    .map((cell) => cell.token)
                    .sort((a, b) => a - b)
                    .join()
            );
        }
    });
    return out;
}

function heldNow(t: TestContext, slots: Int32Array, layers: number, kvHeads: number): string[] {
    const table = t.kv.existingHeadSlots(0)!;
    const out: string[] = [];
    for (let l = 0; l < layers; l++)
        for (let h = 0; h < kvHeads; h++) out.push([...table.tokensOf(slots, l, h)].sort((a, b) => a - b).join());
    return out;
}

describe("H2O on per-head cells (tiny-qwen2, 4 query heads over 2 KV heads)", () => {
    let model: LlamaModel;
    let layers: number;
    let kvHeads: number;

    beforeAll(async () => {
        model = await loadTestModel("gqa");
        const spec = (await getFixtureModelInfo(MODEL_SHAPES.gqa)).spec;
        layers = spec.nLayer;
        kvHeads = spec.nHeadKv;
    });

    afterAll(async () => {
        await model?.dispose();
    });

    test("each KV head keeps its own heavy hitters, and the next round ranks by the scores that moved with its heads", async () => {
        const t = await createTestContext(model);
        try {
            expect(t.kv.kvHeads).toBe(kvHeads);
            await t.kv.configureScoring({enabled: true, gamma: 1, rows: 64, squared: false});
            await evaluateForLogits(t.sequence, randomTokens(60, 21));

            const first = await expectedKeep(t, 30);
            const round = await pruneHeadCells(t.kv, 0, h2oPolicy, params, {maxKeep: 30, tokensSeen: t.sequence.nextTokenIndex});
            expect(round.live).toBe(30);
            expect(round.moves).toBeGreaterThan(0);
            const live = (await t.kv.scores(0)).positions;
            expect(heldNow(t, live, layers, kvHeads)).toEqual(first);
            // the heads' choices differ: per-head cells hold more tokens than any one head
            expect(new Set(first).size).toBeGreaterThan(1);
            expect(round.seen.length - round.evicted.length).toBeGreaterThan(30);

            for (const token of randomTokens(12, 22)) await evaluateForLogits(t.sequence, [token]);
            const second = await expectedKeep(t, 24);
            await pruneHeadCells(t.kv, 0, h2oPolicy, params, {maxKeep: 24, tokensSeen: t.sequence.nextTokenIndex});
            expect(heldNow(t, (await t.kv.scores(0)).positions, layers, kvHeads)).toEqual(second);
            expect((await t.kv.stats()).cellsUsed).toBe(24);
        } finally {
            await t.dispose();
        }
    });
});
