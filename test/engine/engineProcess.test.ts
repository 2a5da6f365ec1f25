// The engine in its own process, as the app and headless mode run it: killed (SIGKILL, as the out-of-memory killer
// does) and aborted (SIGABRT, as llama.cpp's failed checks do) at random moments of an answer, the app loses no saved
// message, keeps what the answer had, restarts the engine with its model, and answers again.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import type {EventChannel, Events, MessageDto} from "../../preload/contract.js";
import {createApp} from "../../main/createApp.js";
import type {EngineProxy} from "../../main/engine/host/EngineProxy.js";
import type {AppServices} from "../../main/services/AppServices.js";
import {extractDemoAnswer, heldOutDemoProblems, isDemoAnswerCorrect} from "../eval/demoTask.js";
import {writeCorruptModels} from "../fixtures/gguf/corruptModels.js";
import {getFixtureModel, REPO_ROOT} from "../fixtures/gguf/fixtures.js";
import {spawnTestEngine, until} from "./spawnTestEngine.js";

const demoModel = path.join(REPO_ROOT, "resources", "models", "ponder-demo.gguf");
const problems = heldOutDemoProblems(4, {minSteps: 30, maxSteps: 50});

/** A small seeded generator, so a failing run can be replayed. */
function random(seed: number): () => number {
    let state = seed >>> 0;
    return () => {
        state = (state + 0x6d2b79f5) >>> 0;
        let t = state;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}

function everyMessage(app: AppServices): MessageDto[] {
    return app.conversations.list().flatMap((summary) => app.conversations.get(summary.id).messages);
}

describe("the engine process", () => {
    let dataDir: string;
    beforeAll(async () => {
        dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "ponder-faults-"));
    });
    afterAll(() => fs.rm(dataDir, {recursive: true, force: true}));

    it("survives 20 kills and native aborts at random moments: no saved message lost, the answer kept, the next one right", async () => {
        const statuses: string[] = [];
        let tokens = 0;
        const app = createApp({
            dataDir,
            version: "test",
            engine: {spawn: spawnTestEngine({faults: true})},
            bundledModelPath: demoModel,
            chat: {flushIntervalMs: 50},
            emit: <C extends EventChannel>(channel: C, payload: Events[C]) => {
                if (channel === "engine:status") statuses.push((payload as Events["engine:status"]).message ?? "");
                if (channel === "chat:delta") {
                    const delta = payload as Events["chat:delta"];
                    tokens = delta.thinkingTokens + delta.answerTokens;
                }
            }
        });
        const engine = app.engine as EngineProxy;
        const next = random(20261123);
        try {
            await app.restoreLastModel();
            expect(app.status().engine.state).toBe("ready");
            const pids = new Set<number>();
            for (let round = 0; round < 20; round++) {
                const conversation = app.conversations.create(`round ${round}`);
                app.conversations.updateSettings(conversation.id, {temperature: 0});
                const saved = everyMessage(app);
                const pid = engine.pid!;
                pids.add(pid);
                tokens = 0;
                app.chat.send(conversation.id, problems[round % problems.length]!.question);
                // Anywhere from reading the question (a quarter of the rounds) to deep in the thought (these answers think
                // for 400 tokens or more).
                const at = next();
                if (at < 0.25) await new Promise((resolve) => setTimeout(resolve, at * 40));
                else await until(() => tokens >= Math.round((at - 0.25) * 400), 60_000, "the answer's tokens");
                const signal = round % 2 === 0 ? "SIGKILL" : "SIGABRT";
                if (signal === "SIGKILL") process.kill(pid, "SIGKILL");
                else engine.injectFault("abort");
                await app.chat.idle();

                // Everything saved before is there, unchanged; the answer keeps what it had and says why it stopped.
                const after = everyMessage(app);
                expect(after.filter((message) => saved.some((before) => before.id === message.id))).toEqual(saved);
                const answer = app.conversations.get(conversation.id).messages.at(-1)!;
                expect(answer.role).toBe("assistant");
                expect(answer.status, `round ${round}`).toBe("interrupted");
                expect(answer.error).toMatch(signal === "SIGKILL" ? /killed \(SIGKILL/ : /aborted \(SIGABRT/);
                await until(() => engine.restarts === round + 1 && app.status().engine.state === "ready", 60_000, `restart ${round + 1}`);
                expect(app.status().engine.model?.path).toBe(demoModel);
            }
            expect(pids.size).toBe(20);
            expect(statuses.some((message) => /restarted in \d+\.\d s with/.test(message))).toBe(true);

            // The next answer, in a conversation that holds an interrupted one, is whole and right.
            const conversation = app.conversations.create("after");
            app.conversations.updateSettings(conversation.id, {temperature: 0});
            app.chat.send(conversation.id, problems[0]!.question);
            await app.chat.idle();
            const answer = app.conversations.get(conversation.id).messages.at(-1)!;
            expect(answer.status).toBe("complete");
            expect(isDemoAnswerCorrect(problems[0]!, extractDemoAnswer(answer.text))).toBe(true);
        } finally {
            await app.dispose();
        }
        // Nothing is left running.
        expect(engine.pid).toBeUndefined();
    }, 600_000);

    it("refuses every model of the corrupt-model suite, added and loaded as a person would, in the same engine process", async () => {
        const corrupt = await writeCorruptModels(path.join(dataDir, "corrupt"), await getFixtureModel("tiny-qwen2"));
        expect(corrupt.length).toBeGreaterThanOrEqual(25);
        const app = createApp({
            dataDir: path.join(dataDir, "corrupt-app"),
            version: "test",
            engine: {spawn: spawnTestEngine()},
            bundledModelPath: demoModel,
            emit: () => {}
        });
        const engine = app.engine as EngineProxy;
        try {
            await app.restoreLastModel();
            const pid = engine.pid;
            const loaded = app.status().engine.model;
            for (const model of corrupt) {
                const error = (await app.models.add(model.path).catch((err: unknown) => err)) as {code?: string; message?: string};
                expect(error.code, model.name).toBe("MODEL_INVALID");
                expect(error.message, model.name).toMatch(model.error);
            }
            expect(engine.pid).toBe(pid);
            expect(engine.restarts).toBe(0);
            expect(app.status().engine.model).toEqual(loaded);
            const conversation = app.conversations.create("after the suite");
            app.chat.send(conversation.id, problems[1]!.question);
            await app.chat.idle();
            expect(app.conversations.get(conversation.id).messages.at(-1)!.status).toBe("complete");
        } finally {
            await app.dispose();
        }
    }, 300_000);

    it("marks a model whose loading stops the engine, puts back the one that worked, and does not load it at start-up", async () => {
        const other = await getFixtureModel("tiny-qwen2");
        const app = createApp({
            dataDir,
            version: "test",
            engine: {spawn: spawnTestEngine({faults: true})},
            bundledModelPath: demoModel,
            emit: () => {}
        });
        const engine = app.engine as EngineProxy;
        let otherId: string;
        try {
            await app.restoreLastModel();
            const demo = app.status().engine.model!;
            otherId = (await app.models.add(other)).id;
            engine.injectFault("abortOnLoad");
            const error = (await app.models.load(otherId).catch((err: unknown) => err)) as {code?: string; message?: string};
            expect(error.code).toBe("MODEL_INVALID");
            expect(error.message).toMatch(/stopped the engine \(The engine process aborted \(SIGABRT/);
            await until(() => app.status().engine.state === "ready", 60_000, "the restart");
            expect(app.status().engine.model?.id).toBe(demo.id);
            expect(app.models.list().find((model) => model.id === otherId)?.crashedAt).not.toBeNull();
            expect(app.models.list().find((model) => model.id === demo.id)?.crashedAt).toBeNull();
            // As if it had been loaded last: start-up must still leave it alone.
            app.settings.update({defaultModelId: otherId});
        } finally {
            await app.dispose();
        }

        const again = createApp({
            dataDir,
            version: "test",
            engine: {spawn: spawnTestEngine()},
            bundledModelPath: demoModel,
            emit: () => {}
        });
        try {
            await again.restoreLastModel();
            expect(again.status().engine.model).toBeNull();
            // A person loading it (now without the fault) clears the mark.
            await again.models.load(otherId);
            expect(again.status().engine.model?.id).toBe(otherId);
            expect(again.models.list().find((model) => model.id === otherId)?.crashedAt).toBeNull();
        } finally {
            await again.dispose();
        }
    }, 300_000);
});
