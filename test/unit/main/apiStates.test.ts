// The API server's KV states: under Full KV a request may start from an earlier request's state (its own folder, the
// newest few kept) and leaves its own; a pruning policy reads every prompt afresh. The prefix reused is OpenAI's
// usage.prompt_tokens_details.cached_tokens, streaming or not, 0 when nothing was.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import OpenAI from "openai";
import {afterEach, describe, expect, it} from "vitest";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {StateStore} from "../../../main/services/StateStore.js";
import {FakeEngine} from "./FakeEngine.js";
import {serveApi} from "./serveApi.js";

const dirs: string[] = [];
const disposers: (() => Promise<void>)[] = [];
afterEach(async () => {
    for (const dispose of disposers.splice(0)) await dispose();
    dirs.splice(0).forEach((dir) => fs.rmSync(dir, {recursive: true, force: true}));
});

async function setup() {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-api-states-"));
    dirs.push(dir);
    const states = new StateStore(dir);
    const engine = new FakeEngine();
    engine.deferStates = true;
    engine.status = {
        ...engine.status,
        model: {
            id: "m1",
            path: "/models/tiny-thinker.gguf",
            name: "tiny",
            sizeBytes: 1,
            architecture: "llama",
            contextLength: 4096,
            addedAt: 0,
            lastUsedAt: null,
            crashedAt: null
        }
    };
    const services = new AppServices(new AppDatabase(":memory:"), engine.asEngine(), () => {}, {
        version: "t",
        modelsDir: "/tmp/ponder-test-models",
        states,
        chat: {flushIntervalMs: 0}
    });
    disposers.push(() => services.dispose());
    const {client} = await serveApi(services, {policy: "full", budget: {kind: "cells", cells: 1024}});
    return {dir, states, engine, services, client};
}

type Body = OpenAI.ChatCompletionCreateParamsNonStreaming;
const messages = [{role: "user" as const, content: "2+2?"}];

describe("the API server's KV states", () => {
    it("offers a Full KV request the API's states, newest first, and a file of its own; a pruning policy none", async () => {
        const {dir, states, engine, client} = await setup();
        await client.chat.completions.create({model: "tiny-thinker", messages});
        const first = engine.requests[0]!.states!;
        expect(first.load).toEqual([]);
        expect(path.dirname(first.save!)).toBe(path.join(dir, "api"));
        // Written before a request that does not continue it takes the engine (here, one under Lethe: it gets no states).
        await client.chat.completions.create({model: "tiny-thinker", messages, ponder: {policy: "lethe", budget: {cells: 512}}} as Body);
        expect(engine.requests[1]!.states).toBeUndefined();
        expect(fs.existsSync(first.save!)).toBe(true);

        await client.chat.completions.create({model: "tiny-thinker", messages});
        const third = engine.requests[2]!.states!;
        expect(third.load).toEqual([first.save]);
        expect(third.save).not.toBe(first.save);
        expect(states.isApiState(third.save!)).toBe(true);
        expect(states.ownerOf(third.save!)).toBeNull();
    });

    it("keeps the newest 8 of its states on disk, and offers none to the chat's conversations", async () => {
        const {states, engine, services, client} = await setup();
        const old = Array.from({length: 10}, (_, i) => {
            const file = states.prepareApi();
            fs.writeFileSync(file, "x");
            fs.utimesSync(file, 1000 + i, 1000 + i);
            return file;
        });
        await client.chat.completions.create({model: "tiny-thinker", messages});
        expect(engine.requests[0]!.states!.load).toEqual(old.slice(2).reverse());
        expect(old.slice(0, 2).map((file) => fs.existsSync(file))).toEqual([false, false]);

        const c = services.conversations.create();
        services.chat.send(c.id, "Hello");
        await services.chat.idle();
        expect(engine.requests[1]!.states!.load.some((file) => states.isApiState(file))).toBe(false);
    });

    it("reports the prefix reused as cached_tokens, streaming and not, and 0 when the prompt was read whole", async () => {
        const {engine, client} = await setup();
        engine.promptLength = 120;
        engine.promptTokens = 120;
        const fresh = await client.chat.completions.create({model: "tiny-thinker", messages});
        expect(fresh.usage).toMatchObject({prompt_tokens: 120, prompt_tokens_details: {cached_tokens: 0}});

        engine.promptTokens = 20; // 100 tokens came from the context or a state on disk
        const reused = await client.chat.completions.create({model: "tiny-thinker", messages});
        expect(reused.usage).toMatchObject({prompt_tokens: 120, prompt_tokens_details: {cached_tokens: 100}});
        const stream = await client.chat.completions.create({
            model: "tiny-thinker",
            messages,
            stream: true,
            stream_options: {include_usage: true}
        });
        let usage: OpenAI.CompletionUsage | null | undefined = null;
        for await (const chunk of stream) usage = chunk.usage ?? usage;
        expect(usage).toMatchObject({prompt_tokens: 120, prompt_tokens_details: {cached_tokens: 100}});
    });
});
