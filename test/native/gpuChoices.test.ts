// The CUDA check's harness writes the policies' choices again in C++ (native/gpu/harness/choices.h), since no Node runs
// on the GPU machine. Here they are held against main/engine/policies/ in `aggregate` mode on the same rounds: the
// snapshots the harness recorded on the task models (native/gpu/snapshots/, `--record`), and seeded random rounds with
// ties, zeros, one dominating score and cells out of position order. choose.cpp, built with the system's C++ compiler
// (no llama.cpp), prints what the C++ frees per round; the TypeScript policies must free the same positions.
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {afterAll, beforeAll, describe, expect, test} from "vitest";
import {policyEntry} from "../../preload/policyCatalogue.js";
import {decide, initialDecideState} from "../../main/engine/policies/decide.js";
import {policies} from "../../main/engine/policies/index.js";
import type {Policy, PruneTarget, ScoreSnapshot} from "../../main/engine/policies/types.js";

const repoRoot = path.resolve(import.meta.dirname, "../..");
const harnessDir = path.join(repoRoot, "native/gpu/harness");
const recorded = ["ponder-demo.txt", "ponder-merge.txt"].map((file) => path.join(repoRoot, "native/gpu/snapshots", file));

type PolicyId = keyof typeof policies;
/** The policies that free cells (Full keeps every one, and the harness runs no round for it). */
const pruning = (Object.keys(policies) as PolicyId[]).filter((id) => !policyEntry(id).keepsEveryToken);

/** A round as a snapshot file holds it (choices.h, "snapshot files"). */
type Round = {
    policy: string;
    phase: PruneTarget["phase"];
    maxKeep: number;
    inputEnd: number;
    tokensSeen: number;
    layers: number;
    heads: number;
    kvHeads: number;
    pos: Int32Array;
    accumulated?: Float32Array;
    last?: Float32Array;
    logBeta?: Float32Array;
    valueNorms?: Float32Array;
};

const arrays = ["accumulated", "last", "log_beta", "value_norms"] as const;
const field = {accumulated: "accumulated", last: "last", log_beta: "logBeta", value_norms: "valueNorms"} as const;

/** The number a snapshot file writes: C's %g (with inf and nan) or JavaScript's own. */
function parseFloatWord(word: string): number {
    const special: Record<string, number> = {inf: Infinity, "-inf": -Infinity, nan: NaN, "-nan": NaN};
    return special[word] ?? Number(word);
}

function parseRounds(text: string): Round[] {
    const words = text.split(/\s+/).filter((word) => word !== "");
    const rounds: Round[] = [];
    let i = 0;
    while (i < words.length) {
        expect(words[i++]).toBe("round");
        const [policy, phase] = [words[i++]!, words[i++]! as PruneTarget["phase"]];
        const [maxKeep, inputEnd, tokensSeen, n, layers, heads, kvHeads] = words.slice(i, i + 7).map(Number) as number[];
        i += 7;
        const round: Round = {
            policy,
            phase,
            maxKeep: maxKeep!,
            inputEnd: inputEnd!,
            tokensSeen: tokensSeen!,
            layers: layers!,
            heads: heads!,
            kvHeads: kvHeads!,
            pos: new Int32Array(n!)
        };
        for (let word = words[i++]; word !== "end"; word = words[i++]) {
            if (word === "pos") {
                round.pos = Int32Array.from(words.slice(i, i + n!), Number);
                i += n!;
                continue;
            }
            const name = arrays.find((a) => a === word);
            expect(name, `array ${word}`).toBeDefined();
            const size = layers! * (name === "accumulated" || name === "last" ? heads! : kvHeads!) * n!;
            round[field[name!]] = Float32Array.from(words.slice(i, i + size), parseFloatWord);
            i += size;
        }
        rounds.push(round);
    }
    return rounds;
}

/** A float32 as text that reads back as the same float32, in C (strtof) as in JavaScript. */
const floatWord = (value: number) =>
    value === -Infinity ? "-inf" : value === Infinity ? "inf" : Object.is(value, -0) ? "-0" : String(Math.fround(value));

function writeRounds(rounds: Round[]): string {
    return rounds
        .map((r) => {
            const lines = [
                `round ${r.policy} ${r.phase} ${r.maxKeep} ${r.inputEnd} ${r.tokensSeen} ${r.pos.length} ${r.layers} ${r.heads} ${r.kvHeads}`,
                `pos ${Array.from(r.pos).join(" ")}`
            ];
            for (const name of arrays) {
                const values = r[field[name]];
                if (values != null && values.length > 0) lines.push(`${name} ${Array.from(values, floatWord).join(" ")}`);
            }
            return [...lines, "end"].join("\n");
        })
        .join("\n");
}

/** mulberry32: the random rounds are the same on every run. */
function random(seed: number): () => number {
    let a = seed >>> 0;
    return () => {
        a = (a + 0x6d2b79f5) >>> 0;
        let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}

/** Rounds of every shape a run can read, and some it rarely does: ties, all-zero rows, one score far above the rest. */
function randomRounds(seed: number, count: number): Round[] {
    const next = random(seed);
    const int = (below: number) => Math.floor(next() * below);
    const phases: PruneTarget["phase"][] = ["prefill-chunk", "after-prefill", "decode"];
    return Array.from({length: count}, (): Round => {
        const n = 1 + int(next() < 0.6 ? 48 : 120); // past LeanKV's window of 64 recent cells in some
        const layers = 1 + int(5);
        const kvHeads = 1 + int(2);
        const heads = kvHeads * (1 + int(2));
        // live positions: increasing with gaps (earlier rounds' evictions), half the rounds listed out of order
        const pos = new Int32Array(n);
        for (let j = 0, p = int(3); j < n; j++, p += 1 + (next() < 0.3 ? int(6) : 0)) pos[j] = p;
        if (next() < 0.5) {
            for (let j = n - 1; j > 0; j--) {
                const k = int(j + 1);
                [pos[j], pos[k]] = [pos[k]!, pos[j]!];
            }
        }
        const newest = Math.max(...pos);
        const style = int(4); // 0: smooth, 1: coarse (ties), 2: with zeros, 3: one cell far above the rest
        // attention's scale per cell: flat, a share of the queries' total, or growing with the cell's age around LeanKV's
        // threshold for the mean attention since written
        const kind = int(3);
        const scale = (j: number) => (kind === 0 ? 2 : kind === 1 ? 2 / n : (1.3 * (newest + 1 - pos[j]!)) / (newest + 1));
        const score = (j: number) => (style === 1 ? (int(4) / 4) * scale(j) : style === 2 && next() < 0.4 ? 0 : next() * scale(j));
        const scores = () => {
            const values = Float32Array.from({length: layers * heads * n}, (_, k) => score(k % n));
            if (style === 3) for (let r = 0; r < layers * heads; r++) values[r * n + int(n)] = 1000 + next();
            return values;
        };
        return {
            policy: "random",
            phase: phases[int(3)]!,
            maxKeep: next() < 0.3 ? n + int(3) : 1 + int(n + 2), // some with room for every cell: the quotas decide
            inputEnd: next() < 0.2 ? -1 : int(newest + 2),
            tokensSeen: next() < 0.3 ? int(newest + 1) : newest + 1 + int(8),
            layers,
            heads,
            kvHeads,
            pos,
            accumulated: scores(),
            last: scores(),
            logBeta: Float32Array.from({length: layers * kvHeads * n}, () => (style === 1 ? -int(4) / 8 : -next() * 0.5)),
            valueNorms: Float32Array.from({length: layers * kvHeads * n}, () => (style === 2 && next() < 0.3 ? 0 : next() * 10))
        };
    });
}

function snapshotOf(round: Round): ScoreSnapshot {
    const empty = new Float32Array(round.layers * round.heads * round.pos.length);
    return {
        positions: round.pos,
        layers: round.layers,
        heads: round.heads,
        accumulated: round.accumulated ?? empty,
        last: round.last ?? empty,
        retention: round.logBeta,
        retentionHeads: round.logBeta == null ? undefined : round.kvHeads,
        valueNorms: round.valueNorms,
        valueHeads: round.valueNorms == null ? undefined : round.kvHeads
    };
}

/** What main/engine/policies/ frees, in choose.cpp's lines: per policy the rounds that hold what it reads, in order. */
function typeScriptChoices(rounds: Round[]): string[] {
    const lines: string[] = [];
    for (const id of pruning) {
        const policy = policies[id] as Policy<unknown, unknown>;
        const needs = policy.needs(policy.defaults);
        let state = initialDecideState(policy, policy.defaults, 0);
        rounds.forEach((round, i) => {
            if (needs.scores !== false && !(round.heads > 0 && round.accumulated != null && round.last != null)) return;
            if (needs.retention === true && round.logBeta == null) return;
            if (needs.valueNorms === true && round.valueNorms == null) return;
            const target: PruneTarget = {
                maxKeep: round.maxKeep,
                phase: round.phase,
                inputEnd: round.inputEnd >= 0 ? round.inputEnd : undefined,
                tokensSeen: round.tokensSeen
            };
            const decision = decide(policy, snapshotOf(round), policy.defaults, state, target, "aggregate");
            state = decision.state;
            lines.push(`${i}\t${id}\t${Array.from(decision.evict).join(",")}`);
        });
    }
    return lines;
}

/** The system's C++ compiler: $CXX, else the first of g++, c++ and clang++ that runs. */
function findCompiler(): string | null {
    const candidates = [process.env.CXX, "g++", "c++", "clang++"].filter((c): c is string => c != null && c !== "");
    return candidates.find((c) => spawnSync(c, ["--version"], {encoding: "utf8"}).status === 0) ?? null;
}

const compiler = findCompiler();
let dir: string;
let choose: string;

/** What choices.h frees for a snapshot file (choose.cpp's lines). */
function cppChoices(file: string): string[] {
    const run = spawnSync(choose, [file, ...pruning], {encoding: "utf8", maxBuffer: 64 * 1024 * 1024});
    expect(run.stderr).toBe("");
    expect(run.status).toBe(0);
    return run.stdout.split("\n").filter((line) => line !== "");
}

describe.skipIf(compiler == null)("the GPU harness's choices (native/gpu/harness/choices.h) against main/engine/policies/", () => {
    beforeAll(() => {
        dir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-gpu-choices-"));
        choose = path.join(dir, "ponder-gpu-choose");
        const built = spawnSync(
            compiler!,
            ["-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-o", choose, path.join(harnessDir, "choose.cpp")],
            {
                encoding: "utf8"
            }
        );
        expect(built.stderr).toBe("");
        expect(built.status).toBe(0);
    });

    afterAll(() => {
        if (dir != null) fs.rmSync(dir, {recursive: true, force: true});
    });

    test("the recorded snapshots hold rounds of every pruning policy's inputs, read in every phase", () => {
        const rounds = recorded.flatMap((file) => parseRounds(fs.readFileSync(file, "utf8")));
        expect(new Set(rounds.map((r) => r.phase))).toEqual(new Set(["prefill-chunk", "after-prefill", "decode"]));
        expect(rounds.some((r) => r.valueNorms != null && r.heads > r.kvHeads)).toBe(true); // LAVa on grouped-query attention
        expect(rounds.some((r) => r.logBeta != null)).toBe(true);
        // each line a policy and a round: every pruning policy has rounds to choose on
        const policiesSeen = new Set(
            recorded.flatMap((file) => typeScriptChoices(parseRounds(fs.readFileSync(file, "utf8")))).map((line) => line.split("\t")[1])
        );
        expect([...policiesSeen].sort()).toEqual([...pruning].sort());
    });

    test.each(recorded.map((file) => [path.relative(repoRoot, file), file]))(
        "%s: the C++ frees what the TypeScript policies free",
        (_name, file) => {
            const typescript = typeScriptChoices(parseRounds(fs.readFileSync(file, "utf8")));
            expect(typescript.length).toBeGreaterThan(0);
            expect(cppChoices(file)).toEqual(typescript);
        }
    );

    test("random rounds: the C++ frees what the TypeScript policies free", () => {
        for (const seed of [1, 2, 3]) {
            const rounds = randomRounds(seed, 150);
            const file = path.join(dir, `random-${seed}.txt`);
            fs.writeFileSync(file, writeRounds(rounds));
            // the file reads back as written, so both sides choose on the same numbers
            expect(parseRounds(fs.readFileSync(file, "utf8"))).toEqual(rounds);
            expect(cppChoices(file)).toEqual(typeScriptChoices(rounds));
        }
    });
});

test.skipIf(compiler != null)("the GPU harness's choices: skipped, no C++ compiler ($CXX, g++, c++ or clang++) on this machine", () => {});
