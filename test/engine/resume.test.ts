// A conversation's state on disk: a fresh engine that loads it answers the next turn token for token as an engine that
// reads the whole history again, and a damaged or foreign state file is refused (the history is read again) without
// harm to the engine.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import type {CompressionSettings, PolicyId} from "../../preload/contract.js";
import {Engine} from "../../main/engine/Engine.js";
import {loadRuntime} from "../../main/engine/loadRuntime.js";
import type {ChatTurn, GenerationResult, StateFiles} from "../../main/engine/types.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {writeFixtureWithGates} from "../fixtures/gguf/fixtureRetention.js";
import {getFixtureModel} from "../fixtures/gguf/fixtures.js";

const modelInfo = (p: string) => ({id: "m", path: p, name: "fixture", sizeBytes: 0, architecture: null, contextLength: null, addedAt: 0, lastUsedAt: null, crashedAt: null});
const question = "Think about the numbers one two three four five six seven eight nine ten. ".repeat(12);
const cellsOf: Record<string, number> = {full: 1024, streamingllm: 160, h2o: 160, lethe: 160, trimkv: 160, lava: 160};

async function answer(engine: Engine, policy: PolicyId, history: ChatTurn[], states?: StateFiles, maxTokens = 40): Promise<{text: string, result: GenerationResult}> {
    const compression: CompressionSettings = {...defaultCompressionSettings, policy, pruneEvery: 16};
    let text = "";
    const result = await engine.generate({
        history, systemPrompt: "", temperature: 0, seed: 1, maxTokens, signal: new AbortController().signal,
        kv: {compression, cells: cellsOf[policy]!}, states,
        onChunk: (chunk) => void (text += `${chunk.segment}:${chunk.text}|`)
    });
    return {text, result};
}

describe("conversation state on disk", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-resume-"));
    let model = "";
    const engines: Engine[] = [];
    const fresh = async () => {
        const engine = new Engine({loadLlama: loadRuntime, threads: 1});
        engines.push(engine);
        await engine.loadModel(model, modelInfo(model));
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
    // pruning goes on where it stood.
    for (const policy of ["full", "streamingllm", "h2o", "lethe", "trimkv", "lava"] as const) {
        it(`${policy}: the next answer from a loaded state is the answer after reading the history again`, async () => {
            const first = await fresh();
            const file = path.join(dir, `${policy}.state`);
            const turn1 = await answer(first, policy, [{role: "user", text: question}], {load: [], save: file});
            expect(turn1.result.states?.saved?.path).toBe(file);
            expect(fs.existsSync(file)).toBe(true);
            const saved = turn1.result.states!.saved!;
            if (policy !== "full")
                expect(saved.liveBytes).toBeLessThan(saved.fullBytes);

            const history: ChatTurn[] = [
                {role: "user", text: question}, {role: "assistant", text: turn1.text.slice(0, 40), thinking: ""}, {role: "user", text: "And then?"}
            ];
            const rebuilt = await answer(await fresh(), policy, history);
            const resumedEngine = await fresh();
            const resumed = await answer(resumedEngine, policy, history, {load: [file]});
            expect(resumed.text).toBe(rebuilt.text);
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
        expect(turn.result.states?.note).toMatch(/could not be saved/);
    }, 60_000);

    it("refuses a truncated, flipped or foreign state file and reads the history again, and the engine goes on", async () => {
        const engine = await fresh();
        const file = path.join(dir, "good.state");
        const turn1 = await answer(engine, "full", [{role: "user", text: question}], {load: [], save: file}, 8);
        const history: ChatTurn[] = [{role: "user", text: question}, {role: "assistant", text: turn1.text.slice(0, 20), thinking: ""}, {role: "user", text: "More."}];
        const reference = await answer(await fresh(), "full", history, undefined, 8);
        const good = fs.readFileSync(file);
        const bad = path.join(dir, "bad.state");
        const variants: [string, Buffer][] = [];
        for (let k = 0; k < 16; k++)
            variants.push([`truncated at ${k}/16`, good.subarray(0, Math.floor((good.byteLength * k) / 16))]);
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
        variants.push(["another model's state", fs.readFileSync(otherFile)]);

        for (const [label, bytes] of variants) {
            fs.writeFileSync(bad, bytes);
            // Another context first, so the history is not in place already.
            await answer(engine, "full", [{role: "user", text: "Something else."}], undefined, 2);
            const result = await answer(engine, "full", history, {load: [bad]}, 8);
            expect(result.result.states?.restored, label).toBeNull();
            expect(result.text, label).toBe(reference.text);
            if (bytes.byteLength > 0)
                expect(result.result.states?.note, label).toMatch(/Reading the conversation again/);
        }
        // The good file still loads after all that.
        await answer(engine, "full", [{role: "user", text: "Something else."}], undefined, 2);
        const resumed = await answer(engine, "full", history, {load: [good.byteLength > 0 ? file : bad]}, 8);
        expect(resumed.result.states?.restored?.path).toBe(file);
        expect(resumed.text).toBe(reference.text);
    }, 300_000);
});
