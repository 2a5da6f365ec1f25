import {describe, expect, it} from "vitest";
import {KvController} from "../../../main/engine/KvController.js";
import type {NativeKv} from "../../../main/engine/native/NativeKv.js";
import type {ScoringOptions} from "../../../main/engine/native/types.js";
import {defaultCompressionSettings} from "../../../main/services/schemas.js";
import type {CompressionSettings} from "../../../preload/contract.js";

/** A NativeKv stand-in: `n` live cells at positions 0..n-1, three layers of two heads whose last row looks at the newest 4. */
function fakeKv(n: number) {
    const calls: ScoringOptions[] = [];
    const evicted: number[][] = [];
    const positions = Int32Array.from({length: n}, (_, i) => i);
    const last = new Float32Array(2 * n);
    for (let h = 0; h < 2; h++) {
        for (let j = n - 4; j < n; j++)
            last[h * n + j] = 0.25;
    }
    const kv = {
        disposed: false,
        configureScoring: async (options: ScoringOptions) => void calls.push(options),
        scores: async () => ({sequenceId: 0, positions, heads: 2, layers: [0, 1, 2].map((layer) => ({layer, positions, heads: 2, accumulated: last, last}))}),
        evict: async (_sequence: number, list: Int32Array) => {
            evicted.push([...list]);
            return list.length;
        }
    } as unknown as NativeKv;
    return {kv, calls, evicted};
}

function controller(kv: NativeKv, compression: Partial<CompressionSettings>) {
    return new KvController({
        kv, sequenceId: 0, cells: 4096, compression: {...defaultCompressionSettings, ...compression}, tokensSeen: () => 100, now: () => 0
    });
}

describe("KvController", () => {
    it("scores prompts by every query row for Lethe and H2O (Eq. 2/5), by the last row for ReFreeKV (k = 1)", async () => {
        for (const [policy, flash, rows] of [["lethe", false, 512], ["h2o", false, 512], ["lethe", true, 32], ["refreekv", false, 1]] as const) {
            const {kv, calls} = fakeKv(16);
            await controller(kv, {policy, flashAttention: flash}).start();
            expect(calls[0]).toMatchObject({enabled: true, rows});
        }
    });

    it("leaves scoring on when an answer ends, so the next turn's policy still sees the history", async () => {
        const {kv, calls} = fakeKv(16);
        const c = controller(kv, {policy: "lethe"});
        await c.start();
        await c.dispose();
        expect(calls.filter((call) => !call.enabled)).toHaveLength(0);
    });

    it("runs ReFreeKV's 1% test right after the prompt, then only the budget evicts (paper mode)", async () => {
        const {kv, evicted} = fakeKv(100);
        const c = controller(kv, {policy: "refreekv", pruneEvery: 4});
        await c.start();
        c.onTokens(1);
        await c.idle();
        // After the prompt: the first 4 positions and the newest few survive (the 4096-cell budget forces nothing).
        expect(evicted[0]).toEqual(Array.from({length: 100 - 4 - 8}, (_, i) => 4 + i));
        c.onTokens(4);
        await c.idle();
        expect(evicted).toHaveLength(1);
    });

    it("keeps a tenth of the budget free until a round has run, then twice the tokens seen decoded during a round", async () => {
        const {kv} = fakeKv(16);
        const c = controller(kv, {policy: "lethe", pruneEvery: 8});
        await c.start();
        expect(c.maxKeep).toBe(4096 - 8 - 410);
        c.onTokens(8); // starts a round
        c.onTokens(1); // decoded while it runs
        c.onTokens(2);
        await c.idle();
        expect(c.headroom).toBe(8 + 2 * 3);
        expect(c.maxKeep).toBe(4096 - 8 - 14);
        // A quicker round later does not lower the room a slower one needed.
        c.onTokens(8);
        await c.idle();
        expect(c.headroom).toBe(14);
    });

    it("tells the policy where the answer's input ends: Lethe keeps an unattended question whole when it fits", async () => {
        for (const [keepInput, questionEvicted] of [[0.5, 0], [0, 22]] as const) {
            const {kv, evicted} = fakeKv(100);
            const compression = {...defaultCompressionSettings, policy: "lethe" as const, pruneEvery: 8,
                params: {...defaultCompressionSettings.params, lethe: {...defaultCompressionSettings.params.lethe, keepInput}}};
            let seen = 30;
            const c = new KvController({kv, sequenceId: 0, cells: 100, compression, tokensSeen: () => seen, now: () => 0});
            await c.start();
            seen = 31;
            c.onTokens(1); // the first answer token: positions 0..29 were the input
            c.onTokens(7);
            await c.idle();
            // Without it, RASR frees the unattended question but for the sinks and the ties ranked first.
            expect(evicted[0]!.filter((p) => p < 30)).toHaveLength(questionEvicted);
        }
    });
});
