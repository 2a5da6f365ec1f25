// The API server over the real engine and the demo reasoning model, driven by the official openai client: the
// thinking and the answer split, max_tokens, a policy per request with its KV figures, a long chain of thought under
// a small budget, aborts, and the app's chat sharing the engine. Greedy decoding on one thread: outcomes are fixed.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import OpenAI from "openai";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import type {EventChannel, Events, MessageDto} from "../../preload/contract.js";
import {createApp} from "../../main/createApp.js";
import type {AppServices} from "../../main/services/AppServices.js";
import {heldOutDemoProblems, isDemoAnswerCorrect} from "../eval/demoTask.js";
import {REPO_ROOT} from "../fixtures/gguf/fixtures.js";
import {spawnTestEngine} from "./spawnTestEngine.js";

const demoModel = path.join(REPO_ROOT, "resources", "models", "ponder-demo.gguf");
const model = "ponder-demo";
type Message = OpenAI.ChatCompletionMessage & {reasoning_content: string};
type KvUsage = {
    policy: string;
    budget_cells: number;
    live_bytes: number;
    allocated_bytes: number;
    full_bytes: number;
    tokens_evicted: number;
    prune_rounds: number;
};

async function startApp(): Promise<{app: AppServices; dataDir: string; done: MessageDto[]}> {
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "ponder-api-"));
    const done: MessageDto[] = [];
    const app = createApp({
        dataDir,
        version: "test",
        engine: {spawn: spawnTestEngine()},
        bundledModelPath: demoModel,
        chat: {flushIntervalMs: 0},
        emit: <C extends EventChannel>(channel: C, payload: Events[C]) => {
            if (channel === "chat:done") done.push((payload as Events["chat:done"]).message);
        }
    });
    await app.restoreLastModel();
    app.settings.update({
        defaultConversationSettings: {...app.settings.get().defaultConversationSettings, temperature: 0, maxTokens: 2048}
    });
    return {app, dataDir, done};
}

describe("the API server on the demo model", () => {
    let app: AppServices;
    let dataDir: string;
    let done: MessageDto[];
    let client: OpenAI;
    const [short, other, third] = heldOutDemoProblems(3, {minSteps: 12, maxSteps: 20}, 500);
    // About 600 thinking tokens: far more than 256 cells hold.
    const long = heldOutDemoProblems(1, {minSteps: 45, maxSteps: 50}, 700)[0]!;

    beforeAll(async () => {
        ({app, dataDir, done} = await startApp());
        const status = await app.server.update({enabled: true, port: 0, policy: "full", budget: {kind: "cells", cells: 4096}});
        client = new OpenAI({baseURL: status.url!, apiKey: "local", maxRetries: 0});
    });

    afterAll(async () => {
        await app?.dispose();
        await fs.rm(dataDir, {recursive: true, force: true});
    });

    it("answers with the thinking in reasoning_content and the answer in content, streaming or not, the same", async () => {
        const completion = await client.chat.completions.create({
            model,
            messages: [{role: "user", content: short!.question}],
            temperature: 0
        });
        const message = completion.choices[0]!.message as Message;
        expect(message.reasoning_content).toMatch(/^\s*[A-Z]{2}=/);
        expect(message.content).not.toContain("</think>");
        expect(isDemoAnswerCorrect(short!, message.content ?? "")).toBe(true);
        expect(completion.choices[0]!.finish_reason).toBe("stop");
        expect(completion.usage!.completion_tokens_details!.reasoning_tokens).toBeGreaterThan(50);

        const stream = await client.chat.completions.create({
            model,
            messages: [{role: "user", content: short!.question}],
            temperature: 0,
            stream: true
        });
        let reasoning = "";
        let content = "";
        for await (const chunk of stream) {
            const delta = chunk.choices[0]?.delta as {content?: string; reasoning_content?: string} | undefined;
            reasoning += delta?.reasoning_content ?? "";
            content += delta?.content ?? "";
        }
        expect(reasoning).toBe(message.reasoning_content);
        expect(content).toBe(message.content);
    });

    it("stops at max_tokens, thinking included", async () => {
        const completion = await client.chat.completions.create({
            model,
            messages: [{role: "user", content: long.question}],
            temperature: 0,
            max_tokens: 20
        });
        expect(completion.usage!.completion_tokens).toBe(20);
        expect(completion.choices[0]!.finish_reason).toBe("length");
    });

    it("ends at a stop sequence, which is not returned", async () => {
        const full = await client.chat.completions.create({model, messages: [{role: "user", content: short!.question}], temperature: 0});
        const thinking = (full.choices[0]!.message as Message).reasoning_content;
        // The third line of the thinking starts with its step's name: stop there.
        const stopAt = thinking.trim().split("\n")[2]!.slice(0, 3);
        const stopped = await client.chat.completions.create({
            model,
            messages: [{role: "user", content: short!.question}],
            temperature: 0,
            stop: [stopAt]
        });
        const message = stopped.choices[0]!.message as Message;
        expect(stopped.choices[0]!.finish_reason).toBe("stop");
        expect((message.reasoning_content + (message.content ?? "")).includes(stopAt)).toBe(false);
        expect(stopped.usage!.completion_tokens).toBeLessThan(full.usage!.completion_tokens);
        expect(thinking.startsWith(message.reasoning_content.trimEnd())).toBe(true);
    });

    it("prunes with the policy the request names, and reports the KV figures in usage", async () => {
        const completion = await client.chat.completions.create({
            model,
            messages: [{role: "user", content: long.question}],
            temperature: 0,
            ponder: {policy: "lethe", budget: {cells: 512}}
        } as OpenAI.ChatCompletionCreateParamsNonStreaming);
        const kv = (completion.usage as unknown as {kv: KvUsage}).kv;
        expect(kv.policy).toBe("lethe");
        expect(kv.budget_cells).toBe(512);
        expect(kv.prune_rounds).toBeGreaterThan(0);
        expect(kv.tokens_evicted).toBeGreaterThan(0);
        expect(kv.live_bytes).toBeLessThan(kv.full_bytes);
        expect(kv.allocated_bytes).toBeGreaterThan(0);
        expect(completion.usage!.prompt_tokens + completion.usage!.completion_tokens).toBeGreaterThan(512);
    });

    it("counts a prompt as Full KV's refusal does: the same figure in usage and in the error, with a stable code", async () => {
        const messages = [{role: "user" as const, content: third!.question}];
        type Body = OpenAI.ChatCompletionCreateParamsNonStreaming;
        const fresh = await client.chat.completions.create({
            model,
            messages,
            temperature: 0,
            max_tokens: 8,
            ponder: {policy: "lethe", budget: {cells: 1024}}
        } as Body);
        const prompt = fresh.usage!.prompt_tokens;
        // Read afresh under a pruning policy: nothing of it was cached, and every token written is counted.
        expect(fresh.usage!.prompt_tokens_details!.cached_tokens).toBe(0);
        expect(fresh.usage!.completion_tokens).toBe(8);
        const refused = await client.chat.completions
            .create({model, messages, temperature: 0, ponder: {policy: "full", budget: {cells: prompt + 8}}} as Body)
            .catch((err: unknown) => err);
        expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
        expect((refused as InstanceType<typeof OpenAI.BadRequestError>).code).toBe("context_length_exceeded");
        expect((refused as Error).message).toContain(`${prompt.toLocaleString("en-US")} tokens long`);
    });

    it("completes a long chain of thought under a small budget where Full KV stops", async () => {
        const ask = (policy: string) =>
            client.chat.completions.create({
                model,
                messages: [{role: "user", content: long.question}],
                temperature: 0,
                ponder: {policy, budget: {cells: 448}}
            } as OpenAI.ChatCompletionCreateParamsNonStreaming);
        const full = await ask("full");
        expect(full.choices[0]!.finish_reason).toBe("length");
        expect((full as unknown as {ponder: {stop_reason: string}}).ponder.stop_reason).toBe("kv_budget_full");
        const lethe = await ask("lethe");
        expect(lethe.choices[0]!.finish_reason).toBe("stop");
        expect(lethe.choices[0]!.message.content?.trim()).toMatch(/^\d$/);
        expect(lethe.usage!.completion_tokens).toBeGreaterThan(full.usage!.completion_tokens);
    });

    it("stops generating when the client aborts, and the engine serves the next request", async () => {
        const abort = new AbortController();
        const stream = await client.chat.completions.create(
            {model, messages: [{role: "user", content: long.question}], temperature: 0, stream: true},
            {signal: abort.signal}
        );
        let chunks = 0;
        await (async () => {
            for await (const _ of stream) {
                if (++chunks === 10) abort.abort();
            }
        })().catch(() => {});
        await waitFor(() => app.server.get().log[0]?.state === "aborted");
        const [entry] = app.server.get().log;
        expect(entry!.thinkingTokens).toBeLessThan(200);
        await waitFor(() => app.status().engine.state === "ready");
        const next = await client.chat.completions.create({model, messages: [{role: "user", content: short!.question}], temperature: 0});
        expect(isDemoAnswerCorrect(short!, next.choices[0]!.message.content ?? "")).toBe(true);
    });

    it("starts a request that continues an earlier one from its state on disk, and reports the prefix as cached_tokens", async () => {
        const system = "Give the value of the program's last variable.";
        const opening = [
            {role: "system" as const, content: system},
            {role: "user" as const, content: other!.question}
        ];
        const first = await client.chat.completions.create({model, messages: opening, temperature: 0});
        const message = first.choices[0]!.message as Message;
        // The app's chat takes the engine in between: the request's state goes to disk before its cells do.
        const conversation = app.conversations.create("in between");
        app.chat.send(conversation.id, short!.question);
        await app.chat.idle();
        expect((await fs.readdir(path.join(dataDir, "states", "api"))).some((name) => name.endsWith(".state"))).toBe(true);

        const stream = await client.chat.completions.create({
            model,
            temperature: 0,
            max_tokens: 8,
            stream: true,
            stream_options: {include_usage: true},
            messages: [
                ...opening,
                {
                    role: "assistant",
                    content: message.content,
                    reasoning_content: message.reasoning_content
                } as OpenAI.ChatCompletionMessageParam,
                {role: "user", content: third!.question}
            ]
        });
        let usage: OpenAI.CompletionUsage | null | undefined = null;
        for await (const chunk of stream) usage = chunk.usage ?? usage;
        const cached = usage!.prompt_tokens_details!.cached_tokens!;
        // The chat's context shared a few template tokens at most: the rest came from the first request's state.
        expect(cached).toBeGreaterThanOrEqual(first.usage!.prompt_tokens - 8);
        expect(cached).toBeLessThan(usage!.prompt_tokens);
    });

    it("shares the engine with the app's chat without changing the chat's answers", async () => {
        // The chat alone, in a second app: two questions in one conversation.
        const reference = await startApp();
        let expected: string[];
        try {
            const conversation = reference.app.conversations.create("reference");
            reference.app.chat.send(conversation.id, other!.question);
            await reference.app.chat.idle();
            reference.app.chat.send(conversation.id, third!.question);
            await reference.app.chat.idle();
            expected = reference.app.conversations
                .get(conversation.id)
                .messages.filter((m) => m.role === "assistant")
                .map((m) => m.thinking + m.text);
        } finally {
            await reference.app.dispose();
            await fs.rm(reference.dataDir, {recursive: true, force: true});
        }

        // The same conversation with a server request in between, and one queued behind the chat's second answer.
        const conversation = app.conversations.create("shared");
        app.chat.send(conversation.id, other!.question);
        await app.chat.idle();
        await client.chat.completions.create({
            model,
            messages: [{role: "user", content: long.question}],
            temperature: 0,
            ponder: {policy: "lethe", budget: {cells: 300}}
        } as OpenAI.ChatCompletionCreateParamsNonStreaming);
        app.chat.send(conversation.id, third!.question);
        const queued = client.chat.completions.create({model, messages: [{role: "user", content: short!.question}], temperature: 0});
        await app.chat.idle();
        const served = await queued;
        const answers = app.conversations.get(conversation.id).messages.filter((m) => m.role === "assistant");
        expect(answers.map((m) => m.status)).toEqual(["complete", "complete"]);
        expect(answers.map((m) => m.thinking + m.text)).toEqual(expected);
        expect(isDemoAnswerCorrect(short!, served.choices[0]!.message.content ?? "")).toBe(true);
        expect(done.length).toBeGreaterThanOrEqual(2);
    });
});

async function waitFor(condition: () => boolean, timeoutMs = 30_000): Promise<void> {
    const start = Date.now();
    while (!condition()) {
        if (Date.now() - start > timeoutMs) throw new Error("Timed out waiting");
        await new Promise((resolve) => setTimeout(resolve, 20));
    }
}
