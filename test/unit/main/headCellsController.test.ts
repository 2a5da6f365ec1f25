// The KV controller on per-head cells (combine mode `heads`): against a stand-in engine that really moves each head's
// contents between cells, every head ends each round with its own tokens by its gates, the table the controller keeps
// matches what the cells hold, the budget holds, and a saved state carries the table.
import {describe, expect, it} from "vitest";
import {KvController} from "../../../main/engine/pruning/KvController.js";
import {HeadSlots, tableOfShape} from "../../../main/engine/pruning/HeadSlots.js";
import type {NativeKv} from "../../../main/engine/native/NativeKv.js";
import {compressionSettingsSchema, defaultCompressionSettings, perHeadCellsNeedHeadRanking} from "../../../main/services/schemas.js";
import type {CompressionSettings} from "../../../preload/contract.js";
import {fakeKvStats} from "./fakeKvStats.js";

const LAYERS = 3;
const HEADS = 2;

/** Gate logits: multiples of 7 are kept for ever by layer 1's head 0 and soon forgotten by every other head. */
function logit(token: number, layer: number, head: number): number {
    if (token % 7 === 0) return layer === 1 && head === 0 ? 20 : -6;
    return -1 - (token % 5);
}

/**
 * Attention received from one query head: multiples of 7 are heavy hitters for layer 1's query head 1 only, the second
 * of the two that read KV head 0.
 */
function attention(token: number, layer: number, queryHead: number): number {
    if (token % 7 === 0) return layer === 1 && queryHead === 1 ? 50 : 0;
    return 1 / (1 + (token % 5));
}

/** Query heads per KV head (grouped-query attention). */
const GROUP = 2;

/** A stand-in engine whose cells hold, per (layer, head), a token each: `moveHeadCells` moves them, `evict` frees cells. */
function headFake() {
    let live: number[] = [];
    let next = 0;
    const held = new Map<number, Int32Array>();
    const tables = new Map<number, HeadSlots>();
    let moveCalls = 0;
    const tokenIn = (slot: number, pair: number) => held.get(slot)?.[pair] ?? slot;
    const kv = {
        disposed: false,
        configureScoring: async () => {},
        configureRetention: async () => {},
        configureValueNorms: async () => {},
        get retentionGates() {
            return {path: "/m.retention.gguf", layers: LAYERS, heads: HEADS, bytes: 1};
        },
        retention: async () => {
            const positions = Int32Array.from(live).reverse();
            const n = positions.length;
            const logits = Array.from({length: LAYERS}, (_, l) =>
                Float32Array.from({length: HEADS * n}, (_, i) =>
                    logit(tokenIn(positions[i % n]!, l * HEADS + Math.floor(i / n)), l, Math.floor(i / n))
                )
            );
            return {sequenceId: 0, positions, heads: HEADS, logits};
        },
        stats: async () => fakeKvStats(live.length, LAYERS, false),
        kvHeads: HEADS,
        scores: async () => {
            const positions = Int32Array.from(live);
            const n = positions.length;
            const queryHeads = HEADS * GROUP;
            const layers = Array.from({length: LAYERS}, (_, layer) => {
                const accumulated = Float32Array.from({length: queryHeads * n}, (_, i) => {
                    const query = Math.floor(i / n);
                    return attention(tokenIn(positions[i % n]!, layer * HEADS + Math.floor(query / GROUP)), layer, query);
                });
                return {layer, positions, heads: queryHeads, accumulated, last: new Float32Array(queryHeads * n)};
            });
            return {sequenceId: 0, positions, heads: queryHeads, layers};
        },
        moveHeadCells: async (_sequence: number, moves: Int32Array) => {
            moveCalls++;
            const sources = Array.from({length: moves.length / 4}, (_, i) =>
                tokenIn(moves[4 * i + 2]!, moves[4 * i]! * HEADS + moves[4 * i + 1]!)
            );
            sources.forEach((token, i) => {
                const to = moves[4 * i + 3]!;
                if (!live.includes(to) || !live.includes(moves[4 * i + 2]!)) throw new Error("a position has no cell");
                const row = held.get(to) ?? new Int32Array(LAYERS * HEADS).fill(to);
                row[moves[4 * i]! * HEADS + moves[4 * i + 1]!] = token;
                held.set(to, row);
            });
            return sources.length;
        },
        evict: async (_sequence: number, list: Int32Array) => {
            const gone = new Set(list);
            if (gone.has(0) || gone.has(live.at(-1)!)) throw new Error("refusing position 0 or the newest");
            const before = live.length;
            live = live.filter((slot) => !gone.has(slot));
            for (const slot of gone) held.delete(slot);
            return before - live.length;
        },
        existingHeadSlots: (sequenceId: number) => tables.get(sequenceId),
        headSlots: (sequenceId: number, layers: number, heads: number) => {
            const table = tableOfShape(tables.get(sequenceId), layers, heads);
            tables.set(sequenceId, table);
            return table;
        }
    } as unknown as NativeKv;
    return {
        kv,
        get live() {
            return [...live];
        },
        get next() {
            return next;
        },
        get moveCalls() {
            return moveCalls;
        },
        /** The tokens (layer, head) holds, ascending: what the cells really hold. */
        heldBy(layer: number, head: number): number[] {
            return live.map((slot) => tokenIn(slot, layer * HEADS + head)).sort((a, b) => a - b);
        },
        decode(count: number) {
            for (let i = 0; i < count; i++) {
                held.delete(next);
                live.push(next++);
            }
        }
    };
}

type Fake = ReturnType<typeof headFake>;

function controller(fake: Fake, compression: Partial<CompressionSettings>, cells: number, now: () => number = () => 0) {
    return new KvController({
        kv: fake.kv,
        sequenceId: 0,
        cells,
        compression: {...defaultCompressionSettings, policy: "trimkv", ...compression},
        tokensSeen: () => fake.next,
        now,
        retentionGates: "/m.retention.gguf",
        retentionReduction: "per-head"
    });
}

async function evaluate(c: KvController, fake: Fake, count: number): Promise<void> {
    let done = 0;
    while (done < count) {
        const allowed = await c.beforeDecode(count - done, done === 0);
        fake.decode(allowed);
        done += allowed;
    }
}

async function run(c: KvController, fake: Fake, prompt: number, generated: number, check?: () => void): Promise<void> {
    await c.start();
    await evaluate(c, fake, prompt);
    c.beginAnswer();
    await evaluate(c, fake, 1);
    for (let i = 0; i < generated; i++) {
        await evaluate(c, fake, 1);
        c.onTokens(1);
        check?.();
    }
}

describe("KvController on per-head cells", () => {
    it("leaves each head its own tokens by its gates within the budget; the table matches the cells", async () => {
        const fake = headFake();
        const cells = 48;
        const c = controller(fake, {combine: "heads", pruneEvery: 8}, cells);
        await run(c, fake, 30, 120, () => expect(fake.live.length).toBeLessThanOrEqual(cells));
        expect(fake.moveCalls).toBeGreaterThan(0);

        const table = fake.kv.existingHeadSlots(0)!;
        for (let l = 0; l < LAYERS; l++)
            for (let h = 0; h < HEADS; h++)
                expect(Array.from(table.tokensOf(fake.live, l, h)).sort((a, b) => a - b)).toEqual(fake.heldBy(l, h));

        // layer 1's head 0 keeps every multiple of 7 it saw; layer 0's head 0, whose gate forgets them, keeps only recent ones
        const sevens = Array.from({length: Math.ceil(fake.next / 7)}, (_, i) => i * 7);
        expect(fake.heldBy(1, 0).filter((token) => token % 7 === 0)).toEqual(sevens);
        const old = fake.next - cells;
        expect(fake.heldBy(0, 0).filter((token) => token % 7 === 0 && token > 0 && token < old)).toEqual([]);
        // every head holds the same number of tokens: the live cells
        for (let l = 0; l < LAYERS; l++) for (let h = 0; h < HEADS; h++) expect(fake.heldBy(l, h)).toHaveLength(fake.live.length);

        // the samples count a token evicted once no head holds it
        const sample = await c.sample(0, true);
        const heldByAny = new Set<number>();
        for (let l = 0; l < LAYERS; l++) for (let h = 0; h < HEADS; h++) for (const token of fake.heldBy(l, h)) heldByAny.add(token);
        expect(sample.tokensEvicted).toBe(fake.next - heldByAny.size);
        expect(sample.pruneRounds).toBeGreaterThan(0);
        // the memory panel's record: the share of (layer, KV head) pairs holding each token, and the layers where one does
        expect(sample.tokens?.kind).toBe("heads");
        const record = sample.tokens!;
        const at = (token: number) => record.positions.indexOf(token);
        const seven = sevens.find((token) => token > 0 && token < old && at(token) >= 0)!;
        expect(record.scores[at(seven)]).toBeCloseTo(1 / (LAYERS * HEADS), 3);
        expect(record.keptBy[at(seven)]).toBe("2");
    });

    it("under auto, gates fitted per head run on per-head cells, and the memory panel's record says so", async () => {
        const fake = headFake();
        const c = controller(fake, {combine: "auto", pruneEvery: 8}, 48);
        await run(c, fake, 30, 120);
        expect(c.combine).toBe("heads");
        expect(fake.moveCalls).toBeGreaterThan(0);
        const record = (await c.sample(0, true)).tokens!;
        expect(record.kind).toBe("heads");
        // a share of the (layer, KV head) pairs (none for a token evicted from all), not a gate's retention
        expect(record.scores.every((share) => share != null && share >= 0 && share <= 1)).toBe(true);
        expect(record.scores.some((share) => Math.abs(share! - 1 / (LAYERS * HEADS)) < 1e-3)).toBe(true);
    });

    it("on shared cells the same gates keep a multiple of 7 in every head at once", async () => {
        const fake = headFake();
        const c = controller(fake, {combine: "aggregate", pruneEvery: 8}, 48);
        await run(c, fake, 30, 120);
        expect(fake.moveCalls).toBe(0);
        expect(fake.heldBy(0, 0)).toEqual(fake.heldBy(1, 0));
    });

    it("counts the time the engine spends moving heads and freeing cells, as a part of the rounds' time", async () => {
        // a clock that ticks a millisecond a reading: every timed span is at least one
        const ticking = () => {
            let ms = 0;
            return () => ms++;
        };
        const fake = headFake();
        const heads = controller(fake, {combine: "heads", pruneEvery: 8}, 48, ticking());
        await run(heads, fake, 30, 120);
        const sample = await heads.sample(0);
        expect(sample.movingMs).toBeGreaterThanOrEqual(fake.moveCalls);
        expect(sample.movingMs).toBeLessThan(sample.scoringMs);
        const shared = headFake();
        const aggregate = controller(shared, {combine: "aggregate", pruneEvery: 8}, 48, ticking());
        await run(aggregate, shared, 30, 120);
        expect((await aggregate.sample(0)).movingMs).toBeUndefined();
    });

    it("a saved state carries the table; a decode at a position forgets what the table knew of it", async () => {
        const fake = headFake();
        const c = controller(fake, {combine: "heads", pruneEvery: 8}, 48);
        await run(c, fake, 30, 60);
        const table = fake.kv.existingHeadSlots(0)!;
        expect(table.movedSlots).toBeGreaterThan(0);
        const saved = c.snapshot();
        expect(saved.headSlots?.slots.length).toBe(table.movedSlots);
        const before = fake.live.map((slot) => table.tokensOf([slot], 1, 0)[0]);

        table.forgetFrom(0);
        await c.restore(saved);
        expect(fake.live.map((slot) => table.tokensOf([slot], 1, 0)[0])).toEqual(before);

        const highest = Math.max(...saved.headSlots!.slots);
        table.forgetFrom(highest + 1);
        expect(table.movedSlots).toBe(saved.headSlots!.slots.length);
    });

    it("a saved table of another shape is refused: for other KV heads or layers than the model's cache, or over moved heads of another shape", async () => {
        const fake = headFake();
        const c = controller(fake, {combine: "heads", pruneEvery: 8}, 48);
        await run(c, fake, 30, 60);
        const saved = c.snapshot();
        const headSlots = saved.headSlots!;
        const fresh = headFake();
        const empty = {slots: new Int32Array(0), tokens: new Int32Array(0)};
        await expect(
            controller(fresh, {combine: "heads"}, 48).restore({...saved, headSlots: {...headSlots, ...empty, heads: HEADS + 1}})
        ).rejects.toThrow(/for 3 KV heads, and this model has 2/);
        const deep = {...headSlots, layers: LAYERS + 1, tokens: new Int32Array(headSlots.slots.length * (LAYERS + 1) * HEADS).fill(1)};
        const other = controller(fresh, {combine: "heads"}, 48);
        await expect(other.restore({...saved, headSlots: deep})).rejects.toThrow(/for 4 layers, and this model's cache has 3/);
        expect(fresh.kv.existingHeadSlots(0)?.movedSlots ?? 0).toBe(0);
        expect(other.snapshot().pruneRounds).toBe(0);
        const wide = {...headSlots, heads: HEADS + 1, tokens: new Int32Array(headSlots.slots.length * LAYERS * (HEADS + 1)).fill(1)};
        await expect(controller(fake, {combine: "heads"}, 48).restore({...saved, headSlots: wide})).rejects.toThrow(
            /moved as 3 layers x 2 KV heads, not 3 x 3/
        );
    });

    it("H2O: each KV head keeps its own heavy hitters by the attention its query heads gave, and its recent window", async () => {
        const fake = headFake();
        const cells = 48;
        const c = controller(fake, {policy: "h2o", combine: "heads", pruneEvery: 8}, cells);
        await run(c, fake, 30, 120, () => expect(fake.live.length).toBeLessThanOrEqual(cells));
        expect(fake.moveCalls).toBeGreaterThan(0);
        const sevens = Array.from({length: Math.ceil(fake.next / 7)}, (_, i) => i * 7);
        // layer 1's KV head 0 keeps every multiple of 7 (its heavy hitters); layer 2's head 1 only those in its recent window
        expect(fake.heldBy(1, 0).filter((token) => token % 7 === 0)).toEqual(sevens);
        const window = cells - Math.floor(cells * 0.5);
        const old = fake.next - window - 8;
        expect(fake.heldBy(2, 1).filter((token) => token % 7 === 0 && token > 0 && token < old)).toEqual([]);
        // both keep their newest tokens
        for (const [l, h] of [
            [1, 0],
            [2, 1]
        ] as const)
            expect(fake.heldBy(l, h)).toContain(fake.next - 1);
        for (let l = 0; l < LAYERS; l++) for (let h = 0; h < HEADS; h++) expect(fake.heldBy(l, h)).toHaveLength(fake.live.length);
    });

    it("Lethe: every KV head of a layer keeps that layer's tokens by RASR summed over its heads; the layers differ", async () => {
        const fake = headFake();
        const cells = 48;
        const c = controller(fake, {policy: "lethe", combine: "heads", pruneEvery: 8}, cells);
        await run(c, fake, 30, 120, () => expect(fake.live.length).toBeLessThanOrEqual(cells));
        for (let l = 0; l < LAYERS; l++) expect(fake.heldBy(l, 1)).toEqual(fake.heldBy(l, 0));
        // layer 1 keeps the multiples of 7 its query head 1 attends to; layer 2 does not
        const sevens = (l: number) => fake.heldBy(l, 0).filter((token) => token % 7 === 0 && token > 0 && token < fake.next - cells);
        expect(sevens(1).length).toBeGreaterThan(3);
        expect(sevens(2)).toEqual([]);
        expect(fake.moveCalls).toBeGreaterThan(0);
    });

    it("is refused for a policy whose paper does not rank per KV head, by the engine and by the settings' schema", async () => {
        const fake = headFake();
        await expect(controller(fake, {policy: "refreekv", combine: "heads"}, 48).start()).rejects.toThrow(
            /Per-head cells are not available for ReFreeKV/
        );
        const refused = compressionSettingsSchema.safeParse({...defaultCompressionSettings, policy: "lava", combine: "heads"});
        expect(refused.success).toBe(false);
        expect(refused.error?.issues[0]?.message).toBe(perHeadCellsNeedHeadRanking);
        expect(compressionSettingsSchema.safeParse({...defaultCompressionSettings, policy: "trimkv", combine: "heads"}).success).toBe(true);
        // Full KV frees nothing: how it would combine does not matter
        expect(compressionSettingsSchema.safeParse({...defaultCompressionSettings, policy: "full", combine: "heads"}).success).toBe(true);
        await controller(fake, {policy: "full", combine: "heads"}, 48).start();
    });
});
