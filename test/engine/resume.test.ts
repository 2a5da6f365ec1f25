// A conversation's state on disk: a fresh engine that loads it answers the next turn token for token as an engine that
// reads the whole history again (a llama fixture, and the merge model: qwen3's q/k norm, grouped-query attention and
// gates made by the calibration), and a damaged or foreign state file is refused (the history is read again) without
// harm to the engine.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import type {CompressionSettings, KvSample, PolicyId} from "../../preload/contract.js";
import {Engine} from "../../main/engine/runtime/Engine.js";
import {loadRuntime} from "../../main/engine/runtime/loadRuntime.js";
import type {ChatTurn, GenerationResult, StateFiles, StateSave} from "../../main/engine/EngineApi.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {writeFixtureWithGates} from "../fixtures/gguf/fixtureRetention.js";
import {getFixtureModel, REPO_ROOT} from "../fixtures/gguf/fixtures.js";
import {heldOutMergeProblems} from "../eval/mergeTask.js";
import {readStateHeader, reviveTyped} from "../../main/engine/states/stateFile.js";
import type {ControllerSnapshot} from "../../main/engine/pruning/KvController.js";

const modelInfo = (p: string) => ({
    id: "m",
    path: p,
    name: "fixture",
    sizeBytes: 0,
    architecture: null,
    contextLength: null,
    addedAt: 0,
    lastUsedAt: null,
    crashedAt: null
});
const question = "Think about the numbers one two three four five six seven eight nine ten. ".repeat(12);
const mergeModel = path.join(REPO_ROOT, "resources", "models", "ponder-merge.gguf");
/** A merge question longer than the pruning policies' 160 cells (90 to 99 numbers). */
const mergeQuestion = heldOutMergeProblems(1, {minItems: 90, maxItems: 99}, 5)[0]!.question;
const cellsOf: Record<string, number> = {full: 1024, streamingllm: 160, h2o: 160, lethe: 160, trimkv: 160, lava: 160};

async function answer(
    engine: Engine,
    policy: PolicyId,
    history: ChatTurn[],
    states?: StateFiles,
    maxTokens = 40,
    combine: CompressionSettings["combine"] = defaultCompressionSettings.combine
): Promise<{text: string; result: GenerationResult; last?: KvSample}> {
    const compression: CompressionSettings = {...defaultCompressionSettings, policy, pruneEvery: 16, combine};
    let text = "";
    let last: KvSample | undefined;
    const result = await engine.generate({
        history,
        systemPrompt: "",
        temperature: 0,
        seed: 1,
        maxTokens,
        signal: new AbortController().signal,
        kv: {compression, cells: cellsOf[policy]!},
        states,
        onChunk: (chunk) => void (text += `${chunk.segment}:${chunk.text}|`),
        onSample: (sample) => void (sample.tokens != null && (last = sample))
    });
    return {text, result, last};
}

describe("conversation state on disk", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-resume-"));
    let model = "";
    const engines: Engine[] = [];
    const fresh = async (file = model) => {
        const engine = new Engine({loadLlama: loadRuntime, threads: 1});
        engines.push(engine);
        await engine.loadModel(file, modelInfo(file));
        return engine;
    };

    beforeAll(async () => {
        // A copy of the fixture with random retention gates beside it (TRIM-KV needs a gate file for its model).
        model = (await writeFixtureWithGates("endless", dir, {seed: 5})).modelPath;
    });
    afterAll(async () => {
        await Promise.all(engines.map((engine) => engine.dispose()));
        fs.rmSync(dir, {recursive: true, force: true});
    });

    // Scores (H2O, Lethe, LAVa), gate logits (TRIM-KV) and value norms (LAVa) are written back into the restored cells, so
    // pruning goes on where it stood. Full KV's state is written after the answer, when asked (the app: when the
    // conversation is left); a pruning policy's while its prompt is read.
    // Per-head cells too (TRIM-KV, H2O, Lethe): the state's cells hold moved heads, and the state carries which token each
    // head holds where.
    for (const [name, policy, combine] of [
        ...(["full", "streamingllm", "h2o", "lethe", "trimkv", "lava"] as const).map((policy) => ["fixture", policy, undefined] as const),
        ...(["trimkv", "h2o", "lethe"] as const).map((policy) => ["fixture", policy, "heads"] as const),
        ...(["full", "lethe", "trimkv"] as const).map((policy) => ["merge model", policy, undefined] as const)
    ]) {
        it(`${name}, ${policy}${combine != null ? ` (${combine})` : ""}: the next answer from a loaded state is the answer after reading the history again`, async () => {
            const onMerge = name === "merge model";
            const file0 = onMerge ? mergeModel : model;
            const text = onMerge ? mergeQuestion : question;
            const first = await fresh(file0);
            const file = path.join(dir, `${name}-${policy}-${combine ?? "auto"}.state`);
            const turn1 = await answer(first, policy, [{role: "user", text}], {load: [], save: file}, 40, combine);
            if (policy === "full") {
                expect(turn1.result.states?.pending).toBe(file);
                expect(turn1.result.states?.saved).toBeNull();
                expect(fs.existsSync(file)).toBe(false);
                turn1.result.states!.saved = (await first.saveState())!.saved;
            }
            expect(turn1.result.states?.saved?.path).toBe(file);
            expect(fs.existsSync(file)).toBe(true);
            const saved = turn1.result.states!.saved!;
            if (policy !== "full") expect(saved.liveBytes).toBeLessThan(saved.fullBytes);
            if (combine === "heads") {
                // the saved cells hold moved heads: a restore that lost the table would rank them as their cells' own tokens
                const bytes = fs.readFileSync(file);
                const controller = reviveTyped(readStateHeader(bytes, bytes.length).header.controller) as ControllerSnapshot;
                expect(controller.headSlots?.slots.length).toBeGreaterThan(0);
            }

            const history: ChatTurn[] = [
                {role: "user", text},
                {role: "assistant", text: turn1.text.slice(0, 40), thinking: ""},
                {role: "user", text: "And then?"}
            ];
            const rebuilt = await answer(await fresh(file0), policy, history, undefined, 40, combine);
            const resumedEngine = await fresh(file0);
            const resumed = await answer(resumedEngine, policy, history, {load: [file]}, 40, combine);
            expect(resumed.text).toBe(rebuilt.text);
            // what the last round left: the tokens each share of the heads still holds
            const held = (turn: typeof resumed) => ({positions: turn.last?.tokens?.positions, scores: turn.last?.tokens?.scores});
            if (combine === "heads") expect(held(resumed)).toEqual(held(rebuilt));
            expect(resumed.result.states?.restored?.path).toBe(file);
            expect(resumed.result.promptTokens).toBeLessThan(rebuilt.result.promptTokens);
        }, 120_000);
    }

    it("answers when the state cannot be written (a full disk, a path that is not a folder), saying why", async () => {
        const engine = await fresh();
        const blocker = path.join(dir, "not-a-folder");
        fs.writeFileSync(blocker, "x");
        const turn = await answer(engine, "full", [{role: "user", text: question}], {load: [], save: path.join(blocker, "state")}, 8);
        expect(turn.text.length).toBeGreaterThan(0);
        expect(turn.result.states?.saved).toBeNull();
        const save = await engine.saveState();
        expect(save?.saved).toBeNull();
        expect(save?.note).toMatch(/could not be saved/);
        const lethe = await answer(engine, "lethe", [{role: "user", text: question}], {load: [], save: path.join(blocker, "lethe")}, 8);
        expect(lethe.text.length).toBeGreaterThan(0);
        expect(lethe.result.states?.note).toMatch(/could not be saved/);
    }, 60_000);

    it("Full KV: a request that does not continue the conversation writes the state waiting first; its next turn supersedes it", async () => {
        const engine = await fresh();
        const settled: StateSave[] = [];
        engine.onStateSettled((save) => settled.push(save));
        const fileA = path.join(dir, "a.state");
        const fileB = path.join(dir, "b.state");
        const fileB2 = path.join(dir, "b2.state");
        const a = await answer(engine, "full", [{role: "user", text: question}], {load: [], save: fileA}, 16);
        expect(a.result.states?.pending).toBe(fileA);
        // Another conversation takes the context: a's state is written before its cells go.
        const otherQuestion = "Count the letters a b c d e f g h. ".repeat(8);
        const b = await answer(engine, "full", [{role: "user", text: otherQuestion}], {load: [], save: fileB}, 16);
        expect(settled).toEqual([{path: fileA, saved: expect.objectContaining({path: fileA, tokens: expect.any(Number)}), note: null}]);
        expect(fs.existsSync(fileA)).toBe(true);
        // The next turn of b continues it: b's state is superseded by b2's, never written.
        const history: ChatTurn[] = [
            {role: "user", text: otherQuestion},
            {role: "assistant", text: b.text.slice(0, 20), thinking: ""},
            {role: "user", text: "And then?"}
        ];
        const b2 = await answer(engine, "full", history, {load: [fileB], save: fileB2}, 8);
        expect(settled.at(-1)).toEqual({path: fileB, saved: null, note: null, superseded: true});
        expect(fs.existsSync(fileB)).toBe(false);
        expect(b2.result.states?.pending).toBe(fileB2);
        // a again, from its state on disk: what a fresh engine answers from it.
        const aHistory: ChatTurn[] = [
            {role: "user", text: question},
            {role: "assistant", text: a.text.slice(0, 20), thinking: ""},
            {role: "user", text: "More."}
        ];
        const resumed = await answer(engine, "full", aHistory, {load: [fileA]}, 8);
        expect(resumed.result.states?.restored?.path).toBe(fileA);
        expect(fs.existsSync(fileB2)).toBe(true);
        expect(resumed.text).toBe((await answer(await fresh(), "full", aHistory, undefined, 8)).text);
    }, 120_000);

    it("Full KV: loads the state sharing the longest prefix, wherever it is in the list", async () => {
        const engine = await fresh();
        const short = path.join(dir, "short.state");
        const long = path.join(dir, "long.state");
        // Shares the opening words of the question, then goes elsewhere.
        await answer(
            engine,
            "full",
            [{role: "user", text: "Think about the numbers one two three. Then stop."}],
            {load: [], save: short},
            4
        );
        await answer(engine, "full", [{role: "user", text: question}], {load: [], save: long}, 8);
        await engine.saveState();
        await answer(engine, "full", [{role: "user", text: "Something else."}], undefined, 2);
        const history: ChatTurn[] = [
            {role: "user", text: question},
            {role: "assistant", text: "ok", thinking: ""},
            {role: "user", text: "Next?"}
        ];
        const resumed = await answer(engine, "full", history, {load: [short, long]}, 4);
        expect(fs.existsSync(short)).toBe(true);
        expect(resumed.result.states?.restored?.path).toBe(long);
    }, 120_000);

    it("refuses a truncated, flipped or foreign state file and reads the history again, and the engine goes on", async () => {
        const engine = await fresh();
        const file = path.join(dir, "good.state");
        const turn1 = await answer(engine, "full", [{role: "user", text: question}], {load: [], save: file}, 8);
        await engine.saveState();
        const history: ChatTurn[] = [
            {role: "user", text: question},
            {role: "assistant", text: turn1.text.slice(0, 20), thinking: ""},
            {role: "user", text: "More."}
        ];
        const reference = await answer(await fresh(), "full", history, undefined, 8);
        const good = fs.readFileSync(file);
        const bad = path.join(dir, "bad.state");
        const variants: [string, Buffer][] = [];
        for (let k = 0; k < 16; k++) variants.push([`truncated at ${k}/16`, good.subarray(0, Math.floor((good.byteLength * k) / 16))]);
        for (const at of [3, 20, 100, Math.floor(good.byteLength / 2), good.byteLength - 1]) {
            const flipped = Buffer.from(good);
            flipped[at] = flipped[at]! ^ 0x55;
            variants.push([`byte ${at} flipped`, flipped]);
        }
        // Another model's state: the same file from another fixture model.
        const other = new Engine({loadLlama: loadRuntime, threads: 1});
        engines.push(other);
        const otherModel = await getFixtureModel("tiny-qwen2");
        await other.loadModel(otherModel, modelInfo(otherModel));
        const otherFile = path.join(dir, "other.state");
        await answer(other, "full", [{role: "user", text: question}], {load: [], save: otherFile}, 4);
        await other.saveState();
        variants.push(["another model's state", fs.readFileSync(otherFile)]);

        for (const [label, bytes] of variants) {
            fs.writeFileSync(bad, bytes);
            // Another context first, so the history is not in place already.
            await answer(engine, "full", [{role: "user", text: "Something else."}], undefined, 2);
            const result = await answer(engine, "full", history, {load: [bad]}, 8);
            expect(result.result.states?.restored, label).toBeNull();
            expect(result.text, label).toBe(reference.text);
            if (bytes.byteLength > 0) expect(result.result.states?.note, label).toMatch(/Reading the conversation again/);
        }
        // The good file still loads after all that.
        await answer(engine, "full", [{role: "user", text: "Something else."}], undefined, 2);
        const resumed = await answer(engine, "full", history, {load: [good.byteLength > 0 ? file : bad]}, 8);
        expect(resumed.result.states?.restored?.path).toBe(file);
        expect(resumed.text).toBe(reference.text);
    }, 300_000);
});
