// Full KV's state after an answer stays in the engine and is written off the answer's path: when the person opens another
// conversation, at once when they left while it was written, when another request takes the engine (its figures still
// reach the answer), and when the app quits, which waits a few seconds at most and says so in the log when it gives up.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {afterEach, describe, expect, it} from "vitest";
import type {ConversationDetail, EventChannel, Events, MessageDto} from "../../../preload/contract.js";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {createDispatch} from "../../../main/ipc/dispatch.js";
import {createHandlers} from "../../../main/ipc/handlers.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {StateStore} from "../../../main/services/StateStore.js";
import {FakeEngine} from "./FakeEngine.js";

const dirs: string[] = [];
const disposers: (() => Promise<void>)[] = [];
afterEach(async () => {
    for (const dispose of disposers.splice(0)) await dispose();
    dirs.splice(0).forEach((dir) => fs.rmSync(dir, {recursive: true, force: true}));
});

function setup(options: {quitSaveMs?: number} = {}) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-state-leave-"));
    dirs.push(dir);
    const states = new StateStore(dir);
    const engine = new FakeEngine();
    engine.deferStates = true;
    const done: MessageDto[] = [];
    const logs: string[] = [];
    const services = new AppServices(
        new AppDatabase(":memory:"),
        engine.asEngine(),
        <C extends EventChannel>(channel: C, payload: Events[C]) => {
            if (channel === "chat:done") done.push((payload as Events["chat:done"]).message);
        },
        {
            version: "t",
            modelsDir: "/tmp/ponder-test-models",
            states,
            chat: {flushIntervalMs: 0, quitSaveMs: options.quitSaveMs, log: (line) => logs.push(line)}
        }
    );
    let disposed = false;
    const dispose = async () => {
        if (!disposed) await services.dispose();
        disposed = true;
    };
    disposers.push(dispose);
    const dispatch = createDispatch(createHandlers(services, {openExternal: async () => {}, pickModelFile: async () => null}));
    const open = async (id: string): Promise<ConversationDetail> => {
        const result = await dispatch("conversations:get", {id});
        if (!result.ok) throw new Error(result.error.message);
        return result.value as ConversationDetail;
    };
    const answer = async (conversationId: string, text = "What is 2 + 2?") => {
        const {assistantMessage} = services.chat.send(conversationId, text);
        await services.chat.idle();
        return assistantMessage.id;
    };
    return {dir, states, engine, services, dispatch, open, answer, done, logs, dispose};
}

describe("an answer's KV state written off the answer's path", () => {
    it("stays in the engine after the answer, marked, and is written in the background when another conversation opens", async () => {
        const {states, engine, services, open, answer, done} = setup();
        const a = services.conversations.create();
        const b = services.conversations.create();
        await open(a.id);
        const first = await answer(a.id);
        const file = states.pathOf(a.id, first);
        expect(engine.requests[0]!.states?.save).toBe(file);
        expect(engine.saveCalls).toEqual([]);
        expect(fs.existsSync(file)).toBe(false);
        expect(done.at(-1)?.stats?.statePending).toBe(true);
        expect((await open(a.id)).messages[1]!.stats?.statePending).toBe(true);
        expect(engine.saveCalls).toEqual([]); // opening the same conversation again leaves it be

        await open(b.id);
        await services.chat.statesWritten();
        expect(engine.saveCalls).toEqual([file]);
        expect(fs.statSync(file).size).toBe(1000);
        const stored = services.conversations.get(a.id).messages[1]!.stats!;
        expect(stored.savedState).toEqual({bytes: 1000, tokens: 100, liveCells: 100, liveBytes: 800, fullBytes: 800});
        expect(stored.statePending).toBeUndefined();
        expect(done.at(-1)).toMatchObject({id: first, stats: {savedState: {bytes: 1000}}});
        expect(done.at(-1)?.stats?.statePending).toBeUndefined();
        expect((await open(a.id)).messages[1]!.stats?.statePending).toBeUndefined();
    });

    it("is written at once when the answer ends after the person left its conversation", async () => {
        const {states, engine, services, open} = setup();
        const a = services.conversations.create();
        const b = services.conversations.create();
        await open(a.id);
        const {assistantMessage} = services.chat.send(a.id, "Think long.");
        await open(b.id);
        await services.chat.idle();
        await services.chat.statesWritten();
        expect(fs.existsSync(states.pathOf(a.id, assistantMessage.id))).toBe(true);
        expect(engine.pending).toBeNull();
    });

    it("gets its figures when another request wrote it, and loses its mark when the next answer of its conversation supersedes it", async () => {
        const {states, engine, services, open, answer, done} = setup();
        const a = services.conversations.create();
        const b = services.conversations.create();
        await open(a.id);
        const first = await answer(a.id);
        const second = await answer(a.id, "And 3 + 3?");
        expect(engine.settled).toEqual([{path: states.pathOf(a.id, first), saved: null, note: null, superseded: true}]);
        expect(done.find((message) => message.id === first && message.stats?.statePending == null)).toBeDefined();
        expect(services.conversations.get(a.id).messages[1]!.stats?.savedState).toBeUndefined();

        // Another conversation's answer takes the engine while a is still shown: the engine writes a's state first.
        services.chat.send(b.id, "Hello?");
        await services.chat.idle();
        expect(fs.existsSync(states.pathOf(a.id, second))).toBe(true);
        expect(services.conversations.get(a.id).messages[3]!.stats?.savedState?.bytes).toBe(1000);
    });

    it("deletes a state written for a message deleted meanwhile", async () => {
        const {states, engine, services, open, answer} = setup();
        const a = services.conversations.create();
        await open(a.id);
        const first = await answer(a.id);
        const userMessage = services.conversations.get(a.id).messages[0]!.id;
        services.deleteMessage(a.id, userMessage);
        // The engine still holds it; a later request writes it before taking the context.
        await services.completions.complete({
            history: [{role: "user", text: "hi"}],
            systemPrompt: "",
            temperature: 0,
            maxTokens: 10,
            policy: "full",
            budget: {kind: "cells", cells: 512},
            signal: new AbortController().signal,
            onChunk: () => {}
        });
        expect(engine.settled[0]?.path).toBe(states.pathOf(a.id, first));
        expect(engine.settled[0]?.saved).not.toBeNull();
        expect(fs.existsSync(states.pathOf(a.id, first))).toBe(false);
    });

    it("is written when the app quits", async () => {
        const {states, services, open, answer, dispose, logs} = setup();
        const a = services.conversations.create();
        await open(a.id);
        const first = await answer(a.id);
        await dispose();
        expect(fs.existsSync(states.pathOf(a.id, first))).toBe(true);
        expect(logs).toEqual([]);
    });

    it("does not hold quitting up past its limit, and says so in the log", async () => {
        const {engine, services, open, answer, dispose, logs} = setup({quitSaveMs: 50});
        const a = services.conversations.create();
        await open(a.id);
        await answer(a.id);
        engine.saveMs = Infinity;
        const started = performance.now();
        await dispose();
        expect(performance.now() - started).toBeLessThan(2000);
        expect(logs).toEqual([expect.stringMatching(/without the KV state being saved: writing it took longer than 0\.05 s/)]);
    });

    it("removes at start-up what a process killed while writing a state left, and keeps the states", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-state-temp-"));
        dirs.push(dir);
        const store = new StateStore(dir);
        const state = store.prepare("c1", "m1");
        fs.writeFileSync(state, "state");
        const leftovers = [`${state}.a1b2c3.tmp`, `${state}.a1b2c3.tmp.llama`, `${state}.0f0f0f.load.tmp`];
        for (const file of leftovers) fs.writeFileSync(file, "partial");
        const services = new AppServices(new AppDatabase(":memory:"), new FakeEngine().asEngine(), () => {}, {
            version: "t",
            modelsDir: "/tmp/x",
            states: store
        });
        disposers.push(() => services.dispose());
        expect(leftovers.map((file) => fs.existsSync(file))).toEqual([false, false, false]);
        expect(fs.readFileSync(state, "utf8")).toBe("state");
    });
});
