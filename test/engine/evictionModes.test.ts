// scripts/retention/evictionModes.py, the simulation of cells kept per layer or per (layer, KV head) at equal memory:
// on both task models (llama with as many KV heads as query heads, qwen3 with grouped-query attention), every mode and
// ranking keeps exactly the round's count of cells in every (layer, KV head) (pooled: all of them together), never
// more than the budget, with the structure of its mode (one set for all, one per layer, one per head, one pool);
// `head` with the same scores in every head keeps and computes exactly what `shared` does; and `shared` through the
// keep mask computes what the engine's eviction of shared cells computes (evictionSim.py's EvictionSim, cells really
// removed); the oracles' foresight is the attention Full's own trace gives each cell from a position on (summed, or
// its strongest read). Needs Python with torch.
import {execFileSync} from "node:child_process";
import path from "node:path";
import {beforeAll, describe, expect, test} from "vitest";
import {torchPython} from "../fixtures/torchPython.js";

const root = path.resolve(import.meta.dirname, "../..");
const scripts = path.join(root, "scripts/retention");

type ModeCase = {
    model: string;
    ranking: string;
    mode: string;
    budget: number;
    rounds: Array<[number, number, number]>;
    peak: number;
    headsAlike: boolean;
    layerHeadsAlike: boolean;
    live: [number, number, number];
};
type Check = {
    cases: ModeCase[];
    sameAsShared: Array<{model: string; rounds: number; sameKeep: boolean; sameLogits: boolean}>;
    againstEviction: Array<{model: string; rounds: number; samePositions: boolean; maxAbsDiff: number; sameArgmax: boolean}>;
    foresight: Array<{model: string; ranking: string; shape: number[]; maxAbsDiff: number; lastRowZero: boolean; rowsFall: boolean}>;
};

const check = `
import json, sys, torch
sys.path.insert(0, sys.argv[1])
torch.set_num_threads(1)
from evictionModes import MODES, ORACLES, RANKINGS, ModeSim, future_attention
from evictionSim import EvictionSim
from ggufModel import load_gguf_model
from sidecar import read_sidecar, sidecar_path_for

def run(sim, prompt, generated):
    return torch.cat((sim.read_input(prompt), sim.decode(generated)))

out = {"cases": [], "sameAsShared": [], "againstEviction": [], "foresight": []}
for path in sys.argv[2:]:
    model, _ = load_gguf_model(path)
    _, gates = read_sidecar(sidecar_path_for(path), path)
    gen = torch.Generator().manual_seed(7)
    tokens = torch.randint(0, 256, (220,), generator=gen).tolist()
    prompt, generated = tokens[:60], tokens[60:]
    budget = 48
    name = path.split("/")[-1]
    # what the oracles foresee, against the attention of the trace written out by hand
    weights = []
    model(tokens, on_attn=lambda layer, w: weights.append(w))
    T, n_kv = len(tokens), model.cfg.n_head_kv
    for ranking in ORACLES:
        future = future_attention(model, tokens, ranking)
        expected = torch.zeros(len(weights), n_kv, T + 1, T)
        for layer, w in enumerate(weights):
            w = w.reshape(n_kv, -1, T, T)
            for q in range(T):
                rest = w[:, :, q:, :]
                expected[layer, :, q] = rest.sum(dim=(1, 2)) if ranking == "oracle" else rest.amax(dim=(1, 2))
        out["foresight"].append({"model": name, "ranking": ranking, "shape": list(future.shape),
                                 "maxAbsDiff": float((future - expected).abs().max()),
                                 "lastRowZero": bool((future[:, :, T] == 0).all()),
                                 "rowsFall": bool((future[:, :, 1:] <= future[:, :, :-1] + 1e-6).all())})
    for ranking in RANKINGS:
        for mode in MODES:
            future = future_attention(model, tokens, ranking) if ranking in ORACLES else None
            sim = ModeSim(model, gates if ranking == "retention" else None, ranking, mode, budget, future=future)
            run(sim, prompt, generated)
            keep = sim.keep
            out["cases"].append({"model": name, "ranking": ranking, "mode": mode, "budget": budget,
                                 "rounds": sim.round_log, "peak": sim.peak,
                                 "headsAlike": bool((keep == keep[:1, :1]).all()),
                                 "layerHeadsAlike": bool((keep == keep[:, :1]).all()),
                                 "live": [int(sim.live().min()), int(sim.live().max()), int(sim.live().sum())]})
    # the same scores in every head: a fixed pseudo-random value per position, so rounds keep old and new cells
    values = torch.rand(4096, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    same = lambda sim: values[:sim.next_pos].expand(sim.n_layer, sim.n_kv, -1)
    shared = ModeSim(model, None, "retention", "shared", budget, per_head_scores=same)
    head = ModeSim(model, None, "retention", "head", budget, per_head_scores=same)
    a, b = run(shared, prompt, generated), run(head, prompt, generated)
    out["sameAsShared"].append({"model": name, "rounds": head.rounds, "sameKeep": bool(torch.equal(shared.keep, head.keep)),
                                "sameLogits": bool(torch.equal(a, b))})
    # the keep mask against cells really removed (the engine's shared eviction), TRIM-KV's shared max
    evicted = EvictionSim(model, gates, "retention", budget)
    masked = ModeSim(model, gates, "retention", "shared", budget)
    a, b = run(evicted, prompt, generated), run(masked, prompt, generated)
    out["againstEviction"].append({"model": name, "rounds": masked.rounds,
                                   "samePositions": bool(torch.equal(evicted.positions, masked.keep[0, 0].nonzero().flatten())),
                                   "maxAbsDiff": float((a - b).abs().max()), "sameArgmax": bool(torch.equal(a.argmax(-1), b.argmax(-1)))})
print(json.dumps(out))
`;

describe("evictionModes.py: cells per layer and per head at equal memory", () => {
    let result: Check;

    beforeAll(() => {
        const models = ["ponder-demo.gguf", "ponder-merge.gguf"].map((file) => path.join(root, "resources/models", file));
        const stdout = execFileSync(torchPython(), ["-c", check, scripts, ...models], {
            encoding: "utf8",
            timeout: 170_000,
            env: {...process.env, OMP_NUM_THREADS: "1", OPENBLAS_NUM_THREADS: "1"}
        });
        result = JSON.parse(stdout.trim().split("\n").at(-1)!) as Check;
    });

    test("every mode keeps exactly the round's count in every (layer, KV head) (pooled: on average), never above the budget", () => {
        expect(result.cases).toHaveLength(2 * 4 * 4);
        for (const c of result.cases) {
            const label = `${c.model} ${c.ranking} ${c.mode}`;
            expect(c.rounds.length, label).toBeGreaterThan(5);
            // each round prunes to the budget less the room of the next tokens (16 at a budget of 48, prompt and decode)
            for (const [target, fewest, most] of c.rounds)
                expect([target, fewest, most], label).toEqual([c.budget - 16, c.budget - 16, c.budget - 16]);
            // filled up to the budget between rounds, never past it
            expect(c.peak, label).toBe(c.budget);
        }
    });

    test("each mode has its structure: one set of cells for all, one per layer, one per (layer, KV head), one pool", () => {
        for (const c of result.cases) {
            const label = `${c.model} ${c.ranking} ${c.mode}`;
            if (c.mode === "shared") expect(c.headsAlike, label).toBe(true);
            if (c.mode === "layer") expect([c.headsAlike, c.layerHeadsAlike], label).toEqual([false, true]);
            if (c.mode === "head" || c.mode === "pooled") expect(c.layerHeadsAlike, label).toBe(false);
            // equal counts in every head but in the pool, where a head holds what its cells are worth against the others'
            const [fewest, most] = c.live;
            if (c.mode === "pooled") expect(fewest, label).toBeLessThan(most);
            else expect(fewest, label).toBe(most);
        }
    });

    test("head mode with the same scores in every head keeps and computes exactly what shared mode does", () => {
        expect(result.sameAsShared).toHaveLength(2);
        for (const c of result.sameAsShared) {
            expect(c.rounds, c.model).toBeGreaterThan(5);
            expect([c.sameKeep, c.sameLogits], c.model).toEqual([true, true]);
        }
    });

    test("the oracles foresee the attention Full's trace gives each cell from each position on", () => {
        expect(result.foresight).toHaveLength(2 * 2);
        for (const f of result.foresight) {
            const label = `${f.model} ${f.ranking}`;
            expect(f.shape.slice(2), label).toEqual([221, 220]);
            expect(f.maxAbsDiff, label).toBeLessThan(1e-4);
            expect([f.lastRowZero, f.rowsFall], label).toEqual([true, true]);
        }
    });

    test("shared mode through the keep mask computes what evicting the shared cells computes", () => {
        for (const c of result.againstEviction) {
            expect(c.rounds, c.model).toBeGreaterThan(5);
            expect(c.samePositions, c.model).toBe(true);
            expect(c.sameArgmax, c.model).toBe(true);
            expect(c.maxAbsDiff, c.model).toBeLessThan(1e-3);
        }
    });
});
