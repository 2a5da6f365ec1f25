// What a round on per-head cells costs in JavaScript, apart from the engine: `pruneHeadCells` (TRIM-KV's keep per
// (layer, KV head), the plan, the round's tallies and the table) over a sequence that grows by the prune interval each
// round and is cut back to the budget, the engine's reads replaced by arrays (gate logits drawn once per token and
// head, a tenth of them long-lived) and its moves and frees by bookkeeping. Prints the milliseconds a round, the
// replayed reads included, and the moves a round:
//
//   npx tsx scripts/headRoundReplay.ts [cells=2048] [rounds=300] [layers=28] [heads=2] [interval=32]
//
// The defaults are the speed bench's per-head run at 16k tokens (bench-1.5b-shape: 28 layers, 2 KV heads; 2,048 cells).
import type {NativeKv} from "../main/engine/native/NativeKv.js";
import {HeadSlots} from "../main/engine/pruning/HeadSlots.js";
import {pruneHeadCells} from "../main/engine/pruning/headRound.js";
import {trimKvPolicy} from "../main/engine/policies/trimkv.js";
import {mulberry32} from "../test/fixtures/gguf/random.js";

const [maxKeep = 2048, rounds = 300, layers = 28, heads = 2, interval = 32] = process.argv.slice(2).map(Number);
const {uniform} = mulberry32(1);
let live = Array.from({length: maxKeep}, (_, i) => i);
let next = maxKeep;
let table: HeadSlots | undefined;
const gates = new Map<number, Float32Array>();
const gateOf = (token: number) => {
    let gate = gates.get(token);
    if (gate == null) {
        gate = Float32Array.from({length: layers * heads}, () => (uniform() < 0.1 ? 8 : 2) + 4 * uniform());
        gates.set(token, gate);
    }
    return gate;
};
const kv = {
    kvHeads: heads,
    async retention() {
        const positions = Int32Array.from(live);
        const n = positions.length;
        const logits = Array.from({length: layers}, (_, l) => {
            const row = new Float32Array(heads * n);
            for (let h = 0; h < heads; h++)
                for (let j = 0; j < n; j++) row[h * n + j] = gateOf(table?.tokenAt(positions[j]!, l, h) ?? positions[j]!)[l * heads + h]!;
            return row;
        });
        return {sequenceId: 0, positions, heads, logits};
    },
    headSlots: (_sequence: number, l: number, h: number) => (table ??= new HeadSlots(l, h)),
    moveHeadCells: async (_sequence: number, moves: Int32Array) => moves.length / 4,
    async evict(_sequence: number, free: Int32Array) {
        const gone = new Set(free);
        live = live.filter((slot) => !gone.has(slot));
        return free.length;
    }
} as unknown as NativeKv;

let ms = 0;
let moves = 0;
for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < interval; i++) live.push(next++);
    const started = performance.now();
    const result = await pruneHeadCells(kv, 0, trimKvPolicy, trimKvPolicy.defaults, {maxKeep, tokensSeen: next});
    ms += performance.now() - started;
    moves += result.moves;
}
console.log(
    `${layers} layers x ${heads} KV heads, ${maxKeep} cells: ${(ms / rounds).toFixed(1)} ms a round (the replayed reads included), ${Math.round(moves / rounds)} moves a round`
);
