// What sending the evicted positions with the memory samples costs decoding: the work the controller and the chat
// service add (positions to ranges at each round, merged until a sample takes them; the ranges serialized with each
// sample), replayed on a real run's own evictions and timed against that run's decode time. Bound: 2%.
import {afterAll, beforeAll, expect, it} from "vitest";
import {Engine} from "../../main/engine/runtime/Engine.js";
import {loadRuntime} from "../../main/engine/runtime/loadRuntime.js";
import {mergeRanges, toRanges} from "../../preload/positionRanges.js";
import {getFixtureModel} from "../fixtures/gguf/fixtures.js";
import {generateRun} from "./generateRun.js";

const modelInfo = (p: string) => ({
    id: "m",
    path: p,
    name: "endless",
    sizeBytes: 0,
    architecture: null,
    contextLength: null,
    addedAt: 0,
    lastUsedAt: null,
    crashedAt: null
});
let engine: Engine;

beforeAll(async () => {
    engine = new Engine({loadLlama: loadRuntime, threads: 1});
    const file = await getFixtureModel("endless");
    await engine.loadModel(file, modelInfo(file));
});
afterAll(async () => {
    await engine?.dispose();
});

it("costs decoding under 2% of its time", async () => {
    const started = performance.now();
    const {samples, tokens} = await generateRun(engine, {policy: "lethe"}, 128, 2000);
    const runMs = performance.now() - started;
    // Each sample's positions, as the rounds between two samples evicted them (16-token rounds: a sample of up to 32
    // tokens holds one or two rounds' positions).
    const rounds = samples.map((sample) => {
        const positions: number[] = [];
        const ranges = sample.evicted ?? [];
        for (let i = 0; i + 1 < ranges.length; i += 2)
            for (let position = ranges[i]!; position < ranges[i + 1]!; position++) positions.push(position);
        return Int32Array.from(positions.sort(() => 0.5 - Math.random()));
    });
    const evicted = rounds.reduce((sum, round) => sum + round.length, 0);
    expect(evicted).toBeGreaterThan(1000);
    const repeats = 20;
    const replay = performance.now();
    for (let repeat = 0; repeat < repeats; repeat++) {
        for (const round of rounds) {
            const ranges = mergeRanges([], toRanges(round));
            JSON.stringify({evicted: ranges});
        }
    }
    const addedMs = (performance.now() - replay) / repeats;
    const share = addedMs / runMs;
    console.log(
        `evicted ranges: ${tokens} tokens in ${runMs.toFixed(0)} ms, ${evicted} positions evicted over ${samples.length} samples; ` +
            `added work ${addedMs.toFixed(2)} ms = ${(share * 100).toFixed(3)}% of the run`
    );
    expect(share).toBeLessThan(0.02);
});
