import {describe, expect, test} from "vitest";
import {HeadSlots, indexTokens} from "../../../main/engine/pruning/HeadSlots.js";
import {mulberry32} from "../../../main/shared/mulberry32.js";

/** Each head's tokens over the live slots, as the table records them. */
function heldTokens(table: HeadSlots, slots: number[], layer: number, head: number): number[] {
    return Array.from(table.tokensOf(slots, layer, head)).sort((a, b) => a - b);
}

/** `count` distinct items of `from`, drawn with `random`. */
function draw(from: number[], count: number, random: () => number): number[] {
    const pool = [...from];
    for (let i = pool.length - 1; i > 0; i--) {
        const j = Math.floor(random() * (i + 1));
        [pool[i], pool[j]] = [pool[j]!, pool[i]!];
    }
    return pool.slice(0, count).sort((a, b) => a - b);
}

describe("indexTokens", () => {
    test("lists every token once, ascending, with each one's index by token", () => {
        const {seen, at} = indexTokens(Int32Array.of(9, 3, 3, 0, 9, 17, 3));
        expect(Array.from(seen)).toEqual([0, 3, 9, 17]);
        expect(at.length).toBe(18);
        for (let token = 0; token < at.length; token++) expect(at[token]).toBe(Array.from(seen).indexOf(token));
        expect(Array.from(indexTokens(new Int32Array(0)).seen)).toEqual([]);
    });
});

describe("HeadSlots", () => {
    test("each head is left with exactly the tokens it keeps, in the kept count of slots, over many random rounds", () => {
        const random = mulberry32(7).uniform;
        const layers = 3;
        const heads = 2;
        const table = new HeadSlots(layers, heads);
        let live = Array.from({length: 40}, (_, i) => i);
        let next = 40;
        for (let round = 0; round < 30; round++) {
            const count = 24;
            const keepSets = Array.from({length: layers * heads}, (_, pair) =>
                draw(heldTokens(table, live, Math.floor(pair / heads), pair % heads), count, random)
            );
            const plan = table.plan(live, (layer, head) => keepSets[layer * heads + head]!, [0, live.at(-1)!]);
            expect(plan.free.length).toBe(live.length - count);
            expect(plan.free).not.toContain(0);
            expect(plan.free).not.toContain(live.at(-1));
            table.apply(plan);
            live = live.filter((slot) => !plan.free.includes(slot));
            for (let layer = 0; layer < layers; layer++)
                for (let head = 0; head < heads; head++)
                    expect(heldTokens(table, live, layer, head)).toEqual(keepSets[layer * heads + head]);
            // new tokens are written in new slots, their own in every head
            for (let i = 0; i < 16; i++) live.push(next++);
        }
        expect(table.movedSlots).toBeGreaterThan(0);
    });

    test("a plan from the caller's held tokens equals the table's own, and held tokens of the wrong size are refused", () => {
        const random = mulberry32(11).uniform;
        const table = new HeadSlots(2, 3);
        let live = Array.from({length: 30}, (_, i) => i);
        for (let round = 0; round < 6; round++) {
            const keepSets = Array.from({length: 6}, (_, pair) =>
                draw(heldTokens(table, live, Math.floor(pair / 3), pair % 3), 18, random)
            );
            const keep = (layer: number, head: number) => keepSets[layer * 3 + head]!;
            const held = new Int32Array(6 * live.length);
            for (let pair = 0; pair < 6; pair++)
                live.forEach((slot, i) => (held[pair * live.length + i] = table.tokenAt(slot, Math.floor(pair / 3), pair % 3)));
            expect(table.tokensHeld(live)).toEqual(held);
            const plan = table.plan(live, keep, [0], {tokens: held});
            expect(plan).toEqual(table.plan(live, keep, [0]));
            expect(plan).toEqual(table.plan(live, keep, [0], {tokens: held, index: indexTokens(held)}));
            expect(() => table.plan(live, keep, [0], {tokens: held.subarray(1)})).toThrow(/held tokens number/);
            table.apply(plan);
            live = live.filter((slot) => !plan.free.includes(slot)).concat(Array.from({length: 12}, (_, i) => 100 * (round + 1) + i));
        }
        expect(table.movedSlots).toBeGreaterThan(0);
    });

    test("a saved table restores into a table of its shape; a crafted one, or one of another model's heads, is refused", () => {
        const table = new HeadSlots(2, 2);
        const plan = table.plan([0, 1, 2, 3, 4, 5], (layer, head) => (layer === 0 && head === 1 ? [0, 1, 3, 5] : [0, 2, 3, 5]));
        table.apply(plan);
        const saved = table.save();
        const again = new HeadSlots(2, 2);
        again.restore(saved, 2);
        expect(again.tokenAt(2, 0, 1)).toBe(1);
        expect(() => new HeadSlots(2, 2).restore(saved, 4)).toThrow(/for 2 KV heads, and this model has 4/);
        expect(() => new HeadSlots(2, 2).restore({slots: saved.slots, tokens: saved.tokens.subarray(1)})).toThrow(/does not fit/);
        const twice = {slots: Int32Array.from([2, 2]), tokens: new Int32Array(8).fill(1)};
        expect(() => new HeadSlots(2, 2).restore(twice)).toThrow(/names a slot twice/);
        const negative = {slots: Int32Array.from([2]), tokens: Int32Array.from([1, -5, 2, 2])};
        expect(() => new HeadSlots(2, 2).restore(negative)).toThrow(/not a position/);
    });

    test("moves only the kept tokens outside the slots kept: none when every head keeps the same tokens", () => {
        const table = new HeadSlots(2, 2);
        const slots = [0, 1, 2, 3, 4, 5];
        const same = table.plan(slots, () => [0, 2, 3, 5]);
        expect(same.moves.length).toBe(0);
        expect(Array.from(same.free)).toEqual([1, 4]);

        // head 1 of layer 0 keeps 1 instead of 2: the slots most heads keep stay (0, 2, 3, 5), one move fills its hole
        const plan = table.plan(slots, (layer, head) => (layer === 0 && head === 1 ? [0, 1, 3, 5] : [0, 2, 3, 5]));
        expect(Array.from(plan.moves)).toEqual([0, 1, 1, 2]);
        expect(Array.from(plan.free)).toEqual([1, 4]);
        table.apply(plan);
        expect(table.tokenAt(2, 0, 1)).toBe(1);
        expect(table.tokenAt(2, 0, 0)).toBe(2);
        expect(table.tokenAt(2, 1, 1)).toBe(2);
    });

    test("refuses unequal counts, a token a head does not hold, a token kept twice, and too many pinned slots", () => {
        const table = new HeadSlots(1, 2);
        const slots = [0, 1, 2, 3];
        expect(() => table.plan(slots, (_, head) => (head === 0 ? [0, 1] : [0, 1, 2]))).toThrow(/same number of cells/);
        expect(() => table.plan(slots, () => [0, 9])).toThrow(/does not hold/);
        expect(() => table.plan(slots, () => [1, 1])).toThrow(/twice/);
        expect(() => table.plan(slots, () => [1], [0, 3])).toThrow(/pinned slots do not fit/);
        expect(() => new HeadSlots(0, 2)).toThrow(RangeError);
    });

    test("a slot whose heads all hold its own token again is no longer recorded as moved", () => {
        const table = new HeadSlots(1, 2);
        const swap = {moves: Int32Array.from([0, 0, 1, 2, 0, 0, 2, 1]), free: new Int32Array(0)};
        table.apply(swap);
        expect([table.tokenAt(1, 0, 0), table.tokenAt(2, 0, 0), table.tokenAt(1, 0, 1)]).toEqual([2, 1, 1]);
        expect(table.movedSlots).toBe(2);
        table.apply(swap);
        expect(table.movedSlots).toBe(0);
        table.apply({moves: Int32Array.from([0, 1, 3, 1]), free: Int32Array.from([3])});
        expect(table.tokenAt(1, 0, 1)).toBe(3);
        table.forget([1]);
        expect(table.tokenAt(1, 0, 1)).toBe(1);
    });
});
