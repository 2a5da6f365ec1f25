import {describe, expect, it} from "vitest";
import {rankDescending, selectAscending, topHeld} from "../../../../main/engine/policies/scoreMath.js";
import {mulberry32} from "../../../fixtures/gguf/random.js";

/** What a per-head keep meant before selection: the first `keep` cells of the full ranking (ties: the earlier cell). */
function byRanking(held: Int32Array, value: Float64Array, keep: number, pinned: ReadonlySet<number>): number[] {
    const v = Float64Array.from(value, (x, j) => (pinned.has(held[j]!) ? Infinity : Number.isNaN(x) ? -Infinity : x));
    return [...rankDescending(v, 0, v.length).subarray(0, keep)].map((j) => held[j]!).sort((a, b) => a - b);
}

describe("per-head keeps by selection", () => {
    it("selects the k-th smallest value as a sort would, with ties, infinities and one value", () => {
        const random = mulberry32(7).uniform;
        for (let trial = 0; trial < 300; trial++) {
            const n = 1 + Math.floor(random() * 80);
            // few distinct values: many ties
            const values = Float64Array.from(
                {length: n},
                () => [-Infinity, Infinity, 0, 1, 2][Math.floor(random() * 5)]! + (random() < 0.3 ? random() : 0)
            );
            const sorted = Float64Array.from(values).sort();
            const k = Math.floor(random() * n);
            expect(selectAscending(Float64Array.from(values), k), `trial ${trial}`).toBe(sorted[k]);
        }
        expect(() => selectAscending(new Float64Array(3), 3)).toThrow(RangeError);
        expect(() => selectAscending(new Float64Array(0), 0)).toThrow(RangeError);
    });

    it("keeps the tokens the full ranking keeps: the highest values, pinned first, the earlier cell of equal ones, NaN last", () => {
        const random = mulberry32(11).uniform;
        for (let trial = 0; trial < 400; trial++) {
            const n = 1 + Math.floor(random() * 120);
            const held = Int32Array.from({length: n}, (_, j) => 3 * j + Math.floor(random() * 3));
            for (let j = n - 1; j > 0; j--) {
                const i = Math.floor(random() * (j + 1));
                [held[i], held[j]] = [held[j]!, held[i]!];
            }
            const value = Float64Array.from({length: n}, () => {
                const r = random();
                return r < 0.1 ? Number.NaN : r < 0.5 ? Math.floor(random() * 4) : -random() * 10;
            });
            const pinned = new Set(Array.from({length: Math.floor(random() * 4)}, () => held[Math.floor(random() * n)]!));
            const keep = Math.floor(random() * (n + 3));
            const expected = byRanking(held, value, Math.min(keep, n), pinned);
            const got = topHeld(held, Float64Array.from(value), keep, pinned);
            expect(
                [...got].sort((a, b) => a - b),
                `trial ${trial}`
            ).toEqual(expected);
            // in cell order
            const cell = new Map(Array.from(held, (token, j) => [token, j]));
            expect([...got].map((token) => cell.get(token)!)).toEqual([...got].map((token) => cell.get(token)!).sort((a, b) => a - b));
        }
    });
});
