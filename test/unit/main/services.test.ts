import {describe, expect, it, vi} from "vitest";
import type {EventChannel, Events} from "../../../preload/contract.js";
import {AppError} from "../../../main/AppError.js";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {demoSampleSteps} from "../../../main/services/firstMinuteCompression.js";
import {FakeEngine} from "./FakeEngine.js";

function setup() {
    const engine = new FakeEngine();
    const events: {channel: EventChannel; payload: unknown}[] = [];
    const db = new AppDatabase(":memory:");
    const services = new AppServices(
        db,
        engine.asEngine(),
        <C extends EventChannel>(channel: C, payload: Events[C]) => {
            events.push({channel, payload});
        },
        {version: "test", modelsDir: "/tmp/ponder-test-models", chat: {flushIntervalMs: 0}}
    );
    return {engine, events, db, services};
}

describe("conversations", () => {
    it("creates, renames, searches and deletes", async () => {
        const {services} = setup();
        const a = services.conversations.create();
        const b = services.conversations.create("  Graph   theory \n");
        expect(a.title).toBe("New conversation");
        expect(b.title).toBe("Graph theory");
        services.conversations.rename(a.id, "Primes");
        expect(services.conversations.list("prim").map((c) => c.id)).toEqual([a.id]);
        expect(() => services.conversations.rename(a.id, "   ")).toThrow(/cannot be empty/);
        await services.deleteConversation(a.id);
        expect(() => services.conversations.get(a.id)).toThrow(/does not exist/);
    });

    it("validates per-conversation settings and falls back field by field on damaged JSON", () => {
        const {services, db} = setup();
        const c = services.conversations.create();
        expect(services.conversations.updateSettings(c.id, {temperature: 1.1}).temperature).toBe(1.1);
        expect(() => services.conversations.updateSettings(c.id, {temperature: 7})).toThrow();
        db.conversations.updateSettings(c.id, '{"temperature": "hot", "maxTokens": 77}', 1);
        const settings = services.conversations.get(c.id).settings;
        expect(settings.temperature).toBe(0.6);
        expect(settings.maxTokens).toBe(77);
    });
});

describe("chat", () => {
    it("streams thinking and answer as deltas, saves them and titles the conversation", async () => {
        const {services, events} = setup();
        const c = services.conversations.create();
        const sent = services.chat.send(c.id, "What is 2 + 2?");
        expect(sent.assistantMessage.status).toBe("streaming");
        await services.chat.idle();

        const detail = services.conversations.get(c.id);
        expect(detail.conversation.title).toBe("What is 2 + 2?");
        const answer = detail.messages[1]!;
        expect(answer).toMatchObject({
            role: "assistant",
            status: "complete",
            thinking: "Let me think",
            text: "The answer is 4",
            thinkingTokens: 3,
            answerTokens: 4,
            promptTokens: 5
        });

        const deltas = events.filter((e) => e.channel === "chat:delta").map((e) => e.payload as Events["chat:delta"]);
        expect(deltas.map((d) => d.text).join("")).toBe("Let me thinkThe answer is 4");
        expect(deltas.every((d) => d.text.length <= 7)).toBe(true);
        expect(events.at(-1)!.channel).toBe("chat:done");
    });

    it("passes earlier turns, with their thinking, as history", async () => {
        const {services, engine} = setup();
        const c = services.conversations.create();
        services.chat.send(c.id, "first");
        await services.chat.idle();
        services.chat.send(c.id, "second");
        await services.chat.idle();
        expect(engine.requests[1]!.history).toEqual([
            {role: "user", text: "first"},
            {role: "assistant", text: "The answer is 4", thinking: "Let me think"},
            {role: "user", text: "second"}
        ]);
    });

    it("stops, keeping what was written, and refuses a second generation meanwhile", async () => {
        const {services} = setup();
        const c = services.conversations.create();
        services.chat.send(c.id, "go");
        expect(() => services.chat.send(c.id, "again")).toThrow(/already being generated/);
        // Stop once something is written (not after a fixed delay: a busy machine may not have started the answer yet).
        await vi.waitFor(
            () => {
                const written = services.conversations.get(c.id).messages[1];
                expect((written?.thinking.length ?? 0) + (written?.text.length ?? 0)).toBeGreaterThan(0);
            },
            {timeout: 5000, interval: 2}
        );
        await services.chat.stop(c.id);
        const answer = services.conversations.get(c.id).messages[1]!;
        expect(answer.status).toBe("stopped");
        expect(answer.thinking.length + answer.text.length).toBeGreaterThan(0);
    });

    it("regenerates the last answer in place", async () => {
        const {services, engine} = setup();
        const c = services.conversations.create();
        services.chat.send(c.id, "q");
        await services.chat.idle();
        engine.answer = ["Another"];
        services.chat.regenerate(c.id);
        await services.chat.idle();
        const messages = services.conversations.get(c.id).messages;
        expect(messages.map((m) => m.role)).toEqual(["user", "assistant"]);
        expect(messages[1]!.text).toBe("Another");
        expect(engine.requests[1]!.history).toEqual([{role: "user", text: "q"}]);
    });

    it("marks an answer cut by max tokens, and Continue finishes the same message", async () => {
        const {services, engine} = setup();
        const c = services.conversations.create();
        services.conversations.updateSettings(c.id, {maxTokens: 2});
        services.chat.send(c.id, "q");
        await services.chat.idle();
        let answer = services.conversations.get(c.id).messages[1]!;
        expect(answer).toMatchObject({status: "stopped", thinking: "Let me", text: "", cut: {reason: "maxTokens", tokens: 2}});
        const firstTokenMs = answer.firstTokenMs;
        expect(firstTokenMs).not.toBeNull();
        expect(firstTokenMs!).toBeGreaterThanOrEqual(0);
        expect(firstTokenMs!).toBeLessThanOrEqual(answer.totalMs);

        services.conversations.updateSettings(c.id, {maxTokens: 3});
        services.chat.continue(c.id);
        await services.chat.idle();
        answer = services.conversations.get(c.id).messages[1]!;
        expect(answer).toMatchObject({
            status: "stopped",
            thinking: "Let me think",
            text: "The answer",
            cut: {reason: "maxTokens", tokens: 5}
        });
        expect(engine.requests[1]).toMatchObject({
            continueLast: true,
            history: [
                {role: "user", text: "q"},
                {role: "assistant", thinking: "Let me", text: ""}
            ]
        });

        services.conversations.updateSettings(c.id, {maxTokens: 100});
        services.chat.continue(c.id);
        await services.chat.idle();
        const messages = services.conversations.get(c.id).messages;
        expect(messages).toHaveLength(2);
        expect(messages[1]).toMatchObject({
            status: "complete",
            thinking: "Let me think",
            text: "The answer is 4",
            cut: null,
            thinkingTokens: 3,
            answerTokens: 4
        });
        // The wait for the first token is the first request's, kept through continuations.
        expect(messages[1]!.firstTokenMs).toBe(firstTokenMs);
        expect(() => services.chat.continue(c.id)).toThrow(/complete: there is nothing to continue/);
    });

    it("continues a stopped answer, and refuses to continue where there is no answer", async () => {
        const {services} = setup();
        const c = services.conversations.create();
        expect(() => services.chat.continue(c.id)).toThrow(/no answer to continue/);
        services.chat.send(c.id, "q");
        await new Promise((resolve) => setTimeout(resolve, 3));
        await services.chat.stop(c.id);
        expect(services.conversations.get(c.id).messages[1]!.status).toBe("stopped");
        services.chat.continue(c.id);
        await services.chat.idle();
        expect(services.conversations.get(c.id).messages[1]).toMatchObject({
            status: "complete",
            thinking: "Let me think",
            text: "The answer is 4"
        });
    });

    it("does not continue an answer Full KV stopped at its budget until the budget or the policy changes", async () => {
        const {services, engine} = setup();
        const c = services.conversations.create();
        services.conversations.updateSettings(c.id, {
            compression: {...services.conversations.get(c.id).settings.compression, policy: "full", budget: {kind: "cells", cells: 512}}
        });
        engine.budgetAfter = 2;
        services.chat.send(c.id, "q");
        await services.chat.idle();
        const stopped = services.conversations.get(c.id).messages[1]!;
        expect(stopped.status).toBe("stopped");
        expect(stopped.compression?.budgetFull).toBe(true);
        expect(() => services.chat.continue(c.id)).toThrow(/Full KV filled 512 cells: raise the KV budget or choose a compression policy/);
        // A larger budget: Continue goes on, and the answer is no longer marked as stopped by the budget.
        engine.budgetAfter = null;
        services.conversations.updateSettings(c.id, {
            compression: {...services.conversations.get(c.id).settings.compression, budget: {kind: "cells", cells: 1024}}
        });
        services.chat.continue(c.id);
        await services.chat.idle();
        const done = services.conversations.get(c.id).messages[1]!;
        expect(done.status).toBe("complete");
        expect(done.compression?.budgetFull).toBeUndefined();
    });

    it("records an engine failure on the message instead of losing it", async () => {
        const {services, engine} = setup();
        engine.failWith = new Error("out of memory");
        const c = services.conversations.create();
        services.chat.send(c.id, "q");
        await services.chat.idle();
        const answer = services.conversations.get(c.id).messages[1]!;
        expect(answer).toMatchObject({status: "error", error: "out of memory", thinking: "Let me"});
    });

    it("stops with a clear error when the disk fills while an answer streams, keeping everything saved before", async () => {
        const {services, engine, db, events} = setup();
        const unhandled: unknown[] = [];
        const onUnhandled = (reason: unknown) => unhandled.push(reason);
        process.on("unhandledRejection", onUnhandled);
        try {
            const c = services.conversations.create();
            services.chat.send(c.id, "first");
            await services.chat.idle();
            // Chunks larger than a page: saving them needs new pages, which a database at its page limit refuses (SQLITE_FULL).
            engine.thought = ["a".repeat(6000), "b".repeat(6000), "c".repeat(6000)];
            const sqlite = (db as unknown as {_db: {pragma(source: string, options?: {simple: boolean}): unknown}})._db;
            const {assistantMessage} = services.chat.send(c.id, "second");
            sqlite.pragma(`max_page_count = ${Number(sqlite.pragma("page_count", {simple: true}))}`);
            await services.chat.idle();
            await new Promise((resolve) => setTimeout(resolve, 20));

            expect(unhandled).toEqual([]);
            expect(engine.requests[1]!.signal.aborted).toBe(true);
            const done = events
                .filter((e) => e.channel === "chat:done")
                .map((e) => e.payload as Events["chat:done"])
                .at(-1)!;
            expect(done.message).toMatchObject({
                id: assistantMessage.id,
                status: "error",
                error: expect.stringMatching(/disk is full.*everything saved before is kept/)
            });

            sqlite.pragma("max_page_count = 1073741823");
            expect(services.chat.recoverInterrupted()).toBe(1);
            const messages = services.conversations.get(c.id).messages;
            expect(messages.map((m) => [m.role, m.status])).toEqual([
                ["user", "complete"],
                ["assistant", "complete"],
                ["user", "complete"],
                ["assistant", "interrupted"]
            ]);
            expect(messages[1]!.text).toBe("The answer is 4");
            expect(messages[2]!.text).toBe("second");
        } finally {
            process.off("unhandledRejection", onUnhandled);
        }
    });

    it("refuses to chat with no model loaded", () => {
        const {services, engine} = setup();
        engine.inspection = null;
        const c = services.conversations.create();
        expect(() => services.chat.send(c.id, "q")).toThrow(/No model is loaded/);
        expect(services.conversations.get(c.id).messages).toHaveLength(0);
    });

    it("marks an answer interrupted, with the reason and what it had, when the engine process stops under it", async () => {
        const {services, engine} = setup();
        engine.failWith = new AppError(
            "ENGINE_STOPPED",
            "The engine process was killed (SIGKILL: out of memory, or ended from outside). The answer is kept up to where it stopped: Continue resumes it."
        );
        const c = services.conversations.create();
        services.chat.send(c.id, "q");
        await services.chat.idle();
        expect(services.conversations.get(c.id).messages[1]).toMatchObject({
            status: "interrupted",
            thinking: "Let me",
            error: expect.stringMatching(/SIGKILL.*Continue resumes it/)
        });
    });

    it("says the model is loading, not missing, while the engine restarts", () => {
        const {services, engine} = setup();
        engine.inspection = null;
        engine.status = {...engine.status, state: "loading", message: "The engine process was killed (SIGKILL): restarting it with fake"};
        const c = services.conversations.create();
        expect(() => services.chat.send(c.id, "q")).toThrow(/model is loading: try again in a moment \(The engine process was killed/);
    });
});

describe("the shipped models' sample problems", () => {
    it("offers a held-out problem of its task, with its known answer, only while a shipped task model is loaded", async () => {
        const {generateDemoProblem, EVAL_SEED_BASE} = await import("../../../main/demo/demoTask.js");
        const engine = new FakeEngine();
        const bundled = "/app/resources/models/ponder-demo.gguf";
        const services = new AppServices(new AppDatabase(":memory:"), engine.asEngine(), () => {}, {
            version: "t",
            modelsDir: "/tmp/x",
            bundledModelPath: bundled
        });
        expect(services.demoSample()).toBeNull();
        const info = {
            id: "m1",
            path: "/models/other.gguf",
            name: "other",
            sizeBytes: 1,
            architecture: "llama",
            contextLength: 4096,
            addedAt: 0,
            lastUsedAt: null,
            crashedAt: null
        };
        engine.status = {...engine.status, model: info};
        expect(services.demoSample()).toBeNull();
        // Another model in the shipped folder, or a shipped model's copy elsewhere, is not recognised.
        engine.status = {...engine.status, model: {...info, path: "/app/resources/models/other.gguf"}};
        expect(services.demoSample()).toBeNull();
        engine.status = {...engine.status, model: {...info, path: "/models/ponder-merge.gguf"}};
        expect(services.demoSample()).toBeNull();
        engine.status = {...engine.status, model: {...info, path: bundled}};
        const sample = services.demoSample()!;
        expect(sample.seed).toBeGreaterThanOrEqual(EVAL_SEED_BASE);
        const problem = generateDemoProblem(sample.seed, demoSampleSteps);
        expect(sample).toMatchObject({
            task: "demo",
            question: problem.question,
            answer: problem.answer,
            answerMeaning: "the value of ZZ",
            size: `${problem.steps} steps`
        });
        expect(problem.steps).toBeGreaterThanOrEqual(24);
        expect(problem.steps).toBeLessThanOrEqual(30);
        expect(sample.about).toMatch(/modulo 10/);
        await services.dispose();
    });

    it("offers the merge model a problem of its own task", async () => {
        const {generateMergeProblem, HELD_OUT_MIN_K_SHARE} = await import("../../../main/demo/mergeTask.js");
        const {EVAL_SEED_BASE} = await import("../../../main/demo/demoTask.js");
        const engine = new FakeEngine();
        const services = new AppServices(new AppDatabase(":memory:"), engine.asEngine(), () => {}, {
            version: "t",
            modelsDir: "/tmp/x",
            bundledModelPath: "/app/resources/models/ponder-demo.gguf"
        });
        const info = {
            id: "m2",
            path: "/app/resources/models/ponder-merge.gguf",
            name: "Ponder Merge Reasoner",
            sizeBytes: 1,
            architecture: "qwen3",
            contextLength: 4096,
            addedAt: 0,
            lastUsedAt: null,
            crashedAt: null
        };
        engine.status = {...engine.status, model: info};
        const sample = services.demoSample()!;
        expect(sample.seed).toBeGreaterThanOrEqual(EVAL_SEED_BASE);
        const problem = generateMergeProblem(sample.seed, {minItems: 16, maxItems: 36, minKShare: HELD_OUT_MIN_K_SHARE});
        expect(problem.k).toBeGreaterThan(problem.items / 2);
        expect(sample).toMatchObject({task: "merge", question: problem.question, answer: problem.answer, size: `${problem.items} numbers`});
        expect(sample.answerMeaning).toMatch(new RegExp(`^the ${problem.k}(st|nd|rd|th) number of the merge$`));
        expect(sample.about).toMatch(/merging two sorted lists/);
        await services.dispose();
    });
});
