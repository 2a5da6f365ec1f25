// The API server's edge, driven by the official openai client over HTTP against a scripted engine: wire format,
// reasoning split, validation, keys, CORS, the shared queue with the app's chat, and aborts.
import OpenAI from "openai";
import {afterEach, describe, expect, it} from "vitest";
import type {EventChannel, Events, ServerRequestLog} from "../../../preload/contract.js";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {FakeEngine} from "./FakeEngine.js";
import {serveApi} from "./serveApi.js";

const disposers: (() => Promise<void>)[] = [];
afterEach(async () => {
    for (const dispose of disposers.splice(0)) await dispose();
});

async function setup(options: {maxQueued?: number} = {}) {
    const engine = new FakeEngine();
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
    const events: {channel: EventChannel; payload: unknown}[] = [];
    const services = new AppServices(
        new AppDatabase(":memory:"),
        engine.asEngine(),
        <C extends EventChannel>(channel: C, payload: Events[C]) => {
            events.push({channel, payload});
        },
        {version: "test", modelsDir: "/tmp/ponder-test-models", chat: {flushIntervalMs: 0}}
    );
    disposers.push(() => services.dispose());
    const {status, client} = await serveApi(services, options.maxQueued != null ? {maxQueued: options.maxQueued} : {});
    const logs = () => events.filter((event) => event.channel === "server:request").map((event) => event.payload as ServerRequestLog);
    return {engine, services, status, client, logs};
}

describe("the API server", () => {
    it("is off by default, and listens on 127.0.0.1 once enabled", async () => {
        const services = new AppServices(new AppDatabase(":memory:"), new FakeEngine().asEngine(), () => {}, {
            version: "t",
            modelsDir: "/tmp/x"
        });
        disposers.push(() => services.dispose());
        await services.server.restore();
        expect(services.server.status()).toMatchObject({running: false, url: null, settings: {enabled: false, host: "127.0.0.1"}});
        const {status} = await serveApi(services);
        expect(status.running).toBe(true);
        expect(status.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    });

    it("answers ponder.compare_full with the same answer made again under Full KV with the same seed: both usages and whether the texts match", async () => {
        const {client, engine} = await setup();
        const ask = (compare: boolean) =>
            client.chat.completions.create({
                model: "tiny-thinker",
                messages: [{role: "user", content: "2+2?"}],
                ponder: {policy: "lethe", budget: {cells: 512}, flash_attention: true, compare_full: compare}
            } as OpenAI.ChatCompletionCreateParamsNonStreaming);
        type Compared = {
            texts_match: boolean;
            answer_matches: boolean;
            thinking_matches: boolean;
            usage: {policy: string};
            full_usage: {policy: string; budget_cells: number};
        };
        const same = await ask(true);
        const [pruned, full] = engine.requests.slice(-2);
        expect(pruned!.kv.compression).toMatchObject({policy: "lethe", budget: {kind: "cells", cells: 512}});
        expect(full!.kv.compression).toMatchObject({policy: "full", budget: {kind: "auto"}, flashAttention: true});
        expect(typeof pruned!.seed).toBe("number");
        expect(full!.seed).toBe(pruned!.seed);
        const compared = (same as unknown as {ponder: {compare_full: Compared}}).ponder.compare_full;
        expect(compared).toMatchObject({
            texts_match: true,
            answer_matches: true,
            thinking_matches: true,
            usage: {policy: "lethe"},
            full_usage: {policy: "full", budget_cells: 4096}
        });
        // The client reads the answer it asked for, not the Full KV one.
        expect(same.choices[0]!.message.content).toBe("The answer is 4");

        // Full KV writes another answer: the texts no longer match.
        const generate = engine.generate.bind(engine);
        engine.generate = async (request) => {
            engine.answer = request.kv?.compression.policy === "full" ? ["The", " answer", " is", " 5"] : ["The", " answer", " is", " 4"];
            return await generate(request);
        };
        const differs = await ask(true);
        expect((differs as unknown as {ponder: {compare_full: Compared}}).ponder.compare_full).toMatchObject({
            texts_match: false,
            answer_matches: false,
            thinking_matches: true
        });
        expect(differs.choices[0]!.message.content).toBe("The answer is 4");

        // One run without it; Full KV has nothing to compare with.
        const before = engine.requests.length;
        expect(((await ask(false)) as unknown as {ponder: object}).ponder).not.toHaveProperty("compare_full");
        expect(engine.requests.length).toBe(before + 1);
        const error = await client.chat.completions
            .create({
                model: "tiny-thinker",
                messages: [{role: "user", content: "x"}],
                ponder: {policy: "full", compare_full: true}
            } as OpenAI.ChatCompletionCreateParamsNonStreaming)
            .catch((err: unknown) => err);
        expect(error).toMatchObject({status: 400});
        expect((error as Error).message).toMatch(/compare_full compares a pruning policy with Full KV/);
    });

    it("lists the loaded model", async () => {
        const {client} = await setup();
        const models = await client.models.list();
        expect(models.data.map((model) => model.id)).toEqual(["tiny-thinker"]);
    });

    it("answers a chat without streaming, the thinking in reasoning_content and the answer in content", async () => {
        const {client, engine} = await setup();
        const completion = await client.chat.completions.create({
            model: "tiny-thinker",
            messages: [
                {role: "system", content: "Be brief."},
                {role: "user", content: "2+2?"}
            ],
            max_tokens: 50,
            temperature: 0,
            seed: 7,
            stop: ["END"]
        });
        const message = completion.choices[0]!.message as (typeof completion.choices)[0]["message"] & {reasoning_content: string};
        expect(message.content).toBe("The answer is 4");
        expect(message.reasoning_content).toBe("Let me think");
        expect(completion.choices[0]!.finish_reason).toBe("stop");
        expect((completion as unknown as {ponder: {stop_reason: string}}).ponder.stop_reason).toBe("end_of_turn");
        expect(completion.usage).toMatchObject({completion_tokens: 7, completion_tokens_details: {reasoning_tokens: 3}});
        expect(engine.requests[0]).toMatchObject({
            systemPrompt: "Be brief.",
            temperature: 0,
            maxTokens: 50,
            seed: 7,
            stop: ["END"],
            history: [{role: "user", text: "2+2?"}]
        });
    });

    it("streams deltas as server-sent events, reasoning first, with usage when asked", async () => {
        const {client} = await setup();
        const stream = await client.chat.completions.create({
            model: "tiny-thinker",
            messages: [{role: "user", content: "2+2?"}],
            stream: true,
            stream_options: {include_usage: true}
        });
        let reasoning = "";
        let content = "";
        const finishes: (string | null)[] = [];
        let usage: OpenAI.CompletionUsage | null | undefined = null;
        for await (const chunk of stream) {
            const delta = chunk.choices[0]?.delta as {content?: string; reasoning_content?: string} | undefined;
            if (delta?.reasoning_content != null) {
                expect(content).toBe(""); // thinking comes before the answer
                reasoning += delta.reasoning_content;
            }
            content += delta?.content ?? "";
            if (chunk.choices[0] != null) finishes.push(chunk.choices[0].finish_reason);
            usage ??= chunk.usage;
        }
        expect(reasoning).toBe("Let me think");
        expect(content).toBe("The answer is 4");
        expect(finishes.at(-1)).toBe("stop");
        expect(usage?.completion_tokens).toBe(7);
    });

    it("maps max_completion_tokens, and reports a length stop", async () => {
        const {client, engine} = await setup();
        engine.generate = async function (request) {
            this.requests.push(request);
            request.onChunk({segment: "thought", text: "a", tokens: 1});
            return {stopReason: "maxTokens", promptTokens: 3};
        };
        const completion = await client.chat.completions.create({
            model: "tiny-thinker",
            messages: [{role: "user", content: "go"}],
            max_completion_tokens: 1
        });
        expect(engine.requests[0]!.maxTokens).toBe(1);
        expect(completion.choices[0]!.finish_reason).toBe("length");
    });

    it("serves /v1/completions", async () => {
        const {client, engine} = await setup();
        const completion = await client.completions.create({model: "tiny-thinker", prompt: "2+2?", max_tokens: 30});
        expect(completion.choices[0]!.text).toBe("The answer is 4");
        expect(engine.requests[0]!.history).toEqual([{role: "user", text: "2+2?"}]);
        const stream = await client.completions.create({model: "tiny-thinker", prompt: "2+2?", stream: true});
        let text = "";
        for await (const chunk of stream) text += chunk.choices[0]?.text ?? "";
        expect(text).toBe("The answer is 4");
    });

    it("takes the policy and budget from the ponder extension object, the server's defaults otherwise", async () => {
        const {client, engine, services} = await setup();
        await services.server.update({policy: "h2o", budget: {kind: "cells", cells: 1024}});
        await client.chat.completions.create({model: "tiny-thinker", messages: [{role: "user", content: "a"}]});
        const body = {
            model: "tiny-thinker",
            messages: [{role: "user" as const, content: "b"}],
            ponder: {policy: "streamingllm", budget: {cells: 300}}
        };
        const completion = await client.chat.completions.create(body as OpenAI.ChatCompletionCreateParamsNonStreaming);
        expect(engine.requests.map((request) => [request.kv.compression.policy, request.kv.cells])).toEqual([
            ["h2o", 1024],
            ["streamingllm", 300]
        ]);
        expect((completion.usage as unknown as {kv: object}).kv).toMatchObject({policy: "streamingllm", budget_cells: 300});
    });

    it("takes LeanKV and the K and V cache types from the ponder extension, turning flash attention on for quantized values", async () => {
        const {client, engine} = await setup();
        engine.inspection = {...engine.inspection!, layers: 2, headCount: 4, headCountKv: 2, embeddingLength: 512};
        const ask = (ponder: object) =>
            client.chat.completions.create({
                model: "tiny-thinker",
                messages: [{role: "user", content: "b"}],
                ponder
            } as OpenAI.ChatCompletionCreateParamsNonStreaming);
        const completion = await ask({policy: "leankv", budget: {cells: 512}, cache_type_k: "q8_0", cache_type_v: "q4_0"});
        expect(engine.requests.at(-1)!.kv.compression).toMatchObject({
            policy: "leankv",
            kvType: "q8_0",
            kvTypeV: "q4_0",
            flashAttention: true
        });
        expect((completion.usage as unknown as {kv: object}).kv).toMatchObject({
            policy: "leankv",
            cache_type_k: "q8_0",
            cache_type_v: "q4_0"
        });
        // Quantized keys alone keep the app's flash attention setting (off by default): llama.cpp makes them without it.
        await ask({cache_type_k: "q4_0"});
        expect(engine.requests.at(-1)!.kv.compression).toMatchObject({kvType: "q4_0", kvTypeV: "f16", flashAttention: false});
        await ask({});
        expect(engine.requests.at(-1)!.kv.compression).toMatchObject({kvType: "f16", kvTypeV: "f16", flashAttention: false});

        // Pairs llama.cpp cannot make are refused in words, naming the parameter where the body alone says so.
        const refused = async (ponder: object) => {
            const error = await ask(ponder).catch((err: unknown) => err);
            expect(error).toBeInstanceOf(OpenAI.BadRequestError);
            return error as InstanceType<typeof OpenAI.BadRequestError>;
        };
        const noFlash = await refused({cache_type_k: "q8_0", cache_type_v: "q4_0", flash_attention: false});
        expect(noFlash.param).toBe("ponder.flash_attention");
        expect(noFlash.message).toBe(
            "400 ponder.flash_attention: A quantized V cache (q8_0 or q4_0 values) needs flash attention: turn flash attention on, " +
                "or store the values as F16."
        );
        engine.inspection = {...engine.inspection, embeddingLength: 64};
        const narrow = await refused({cache_type_k: "q8_0"});
        expect(narrow.message).toBe(
            "400 This model's attention heads are 16 values wide, and a q8_0 K cache stores blocks of 32: choose F16 for K."
        );
        expect((await refused({cache_type_v: "q3"})).param).toBe("ponder.cache_type_v");
        expect(engine.requests).toHaveLength(3);
    });

    it("passes top_p, and llama-server's top_k, min_p and repeat_penalty, to the engine", async () => {
        const {client, engine} = await setup();
        const body = {
            model: "tiny-thinker",
            messages: [{role: "user" as const, content: "b"}],
            top_p: 0.95,
            top_k: 20,
            min_p: 0.05,
            repeat_penalty: 1.1
        };
        await client.chat.completions.create(body as OpenAI.ChatCompletionCreateParamsNonStreaming);
        expect(engine.requests.at(-1)).toMatchObject({topP: 0.95, topK: 20, minP: 0.05, repeatPenalty: 1.1});
        await client.chat.completions.create({model: "tiny-thinker", messages: [{role: "user", content: "b"}]});
        expect(engine.requests.at(-1)).toMatchObject({topP: undefined, topK: undefined, minP: undefined, repeatPenalty: undefined});
    });

    it("answers 400 with an OpenAI error for malformed bodies and for sampling fields it cannot honour", async () => {
        const {client, status} = await setup();
        const cases: [object, RegExp, string | null][] = [
            [{model: "tiny-thinker", messages: []}, /at least one message/, "messages"],
            [{model: "tiny-thinker", messages: [{role: "user", content: "x"}], temperature: 9}, /temperature/, "temperature"],
            [{model: "tiny-thinker", messages: [{role: "user", content: "x"}], top_p: 0}, /top_p must be above 0/, "top_p"],
            [
                {model: "tiny-thinker", messages: [{role: "user", content: "x"}], frequency_penalty: 0.4},
                /frequency_penalty/,
                "frequency_penalty"
            ],
            [{model: "tiny-thinker", messages: [{role: "user", content: "x"}], n: 2}, /n is not supported/, "n"],
            [
                {model: "tiny-thinker", messages: [{role: "user", content: "x"}], tools: [{type: "function", function: {name: "f"}}]},
                /tools/,
                "tools"
            ],
            [
                {model: "tiny-thinker", messages: [{role: "user", content: "x"}], typo_field: 1},
                /Unrecognized request argument: typo_field/,
                "typo_field"
            ],
            [
                {model: "tiny-thinker", messages: [{role: "user", content: "x"}], ponder: {policy: "magic"}},
                /ponder.policy/,
                "ponder.policy"
            ],
            [
                {model: "tiny-thinker", messages: [{role: "user", content: "x"}], ponder: {budget: {cells: 3}}},
                /ponder.budget/,
                "ponder.budget.cells"
            ],
            [
                {model: "tiny-thinker", messages: [{role: "assistant", content: "x"}]},
                /last message must be the user's|start with a user message/,
                "messages[0]"
            ]
        ];
        for (const [body, message, param] of cases) {
            const error = await client.chat.completions
                .create(body as OpenAI.ChatCompletionCreateParamsNonStreaming)
                .catch((err: unknown) => err);
            expect(error, JSON.stringify(body)).toBeInstanceOf(OpenAI.BadRequestError);
            expect((error as InstanceType<typeof OpenAI.BadRequestError>).message).toMatch(message);
            expect((error as InstanceType<typeof OpenAI.BadRequestError>).param).toBe(param);
            expect((error as InstanceType<typeof OpenAI.BadRequestError>).type).toBe("invalid_request_error");
        }
        // Neutral values are what the engine does anyway: accepted.
        await expect(
            client.chat.completions.create({
                model: "tiny-thinker",
                messages: [{role: "user", content: "x"}],
                top_p: 1,
                n: 1,
                presence_penalty: 0
            })
        ).resolves.toMatchObject({object: "chat.completion"});
        // Bodies that are not JSON at all, or too large.
        const bad = await fetch(`${status.url}/chat/completions`, {
            method: "POST",
            headers: {"content-type": "application/json"},
            body: '{"model": '
        });
        expect(bad.status).toBe(400);
        expect(await bad.json()).toMatchObject({error: {type: "invalid_request_error", code: "invalid_json"}});
        const huge = JSON.stringify({model: "tiny-thinker", messages: [{role: "user", content: "x".repeat(5 * 1024 * 1024)}]});
        await expect(post(status.url!, huge, {"content-length": String(Buffer.byteLength(huge))})).resolves.toMatchObject({
            status: 413,
            code: "body_too_large"
        });
        await expect(post(status.url!, huge, {"transfer-encoding": "chunked"})).resolves.toMatchObject({
            status: 413,
            code: "body_too_large"
        });
        await expect(post(status.url!, "{}", {"content-type": "text/plain"})).resolves.toMatchObject({status: 415});
        const wrongModel = await client.chat.completions
            .create({model: "gpt-4o", messages: [{role: "user", content: "x"}]})
            .catch((err: unknown) => err);
        expect(wrongModel).toBeInstanceOf(OpenAI.NotFoundError);
        expect((wrongModel as Error).message).toMatch(/serves "tiny-thinker"/);
    });

    it("requires the key once one is generated: 401 without it or with a wrong one", async () => {
        const {services, status} = await setup();
        const {key} = await services.server.generateKey();
        const url = services.server.status().url!;
        expect(url).toBe(status.url);
        const without = new OpenAI({baseURL: url, apiKey: "wrong", maxRetries: 0});
        await expect(without.models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
        const none = await fetch(`${url}/models`);
        expect(none.status).toBe(401);
        const withKey = new OpenAI({baseURL: url, apiKey: key, maxRetries: 0});
        await expect(withKey.models.list()).resolves.toBeDefined();
        // The key is stored as its hash only.
        expect(JSON.stringify(services.db.settings.get("server"))).not.toContain(key);
    });

    it("refuses to listen off loopback without a key", async () => {
        const {services} = await setup();
        await expect(services.server.update({host: "0.0.0.0"})).rejects.toThrow(/API key is required/);
        expect(services.server.status().settings.host).toBe("127.0.0.1");
    });

    it("sends no CORS headers and refuses browser origins unless listed", async () => {
        const {services, status} = await setup();
        const refused = await fetch(`${status.url}/models`, {headers: {origin: "https://evil.example"}});
        expect(refused.status).toBe(403);
        expect(refused.headers.get("access-control-allow-origin")).toBeNull();
        const plain = await fetch(`${status.url}/models`);
        expect(plain.headers.get("access-control-allow-origin")).toBeNull();
        const listed = await services.server.update({corsOrigins: ["https://notebook.example"]});
        const allowed = await fetch(`${listed.url}/models`, {headers: {origin: "https://notebook.example"}});
        expect(allowed.status).toBe(200);
        expect(allowed.headers.get("access-control-allow-origin")).toBe("https://notebook.example");
        const preflight = await fetch(`${listed.url}/chat/completions`, {method: "OPTIONS", headers: {origin: "https://notebook.example"}});
        expect(preflight.status).toBe(204);
    });

    it("refuses a Host header that is not loopback (DNS rebinding)", async () => {
        const {status} = await setup();
        const http = await import("node:http");
        const port = new URL(status.url!).port;
        const code = await new Promise<number>((resolve, reject) => {
            http.get({host: "127.0.0.1", port, path: "/v1/models", headers: {host: "attacker.example"}}, (res) => {
                res.resume();
                resolve(res.statusCode ?? 0);
            }).on("error", reject);
        });
        expect(code).toBe(403);
    });

    it("runs one generation at a time: a full queue answers 429, and the app's chat waits its turn", async () => {
        const {client, engine, services, logs} = await setup({maxQueued: 1});
        engine.thought = Array.from({length: 150}, () => " hm");
        const first = client.chat.completions.create({model: "tiny-thinker", messages: [{role: "user", content: "one"}]});
        await waitFor(() => engine.requests.length === 1);
        const second = client.chat.completions.create({model: "tiny-thinker", messages: [{role: "user", content: "two"}]});
        await waitFor(() =>
            logs().some((entry) => entry.state === "queued" && entry.path === "/v1/chat/completions" && services.queue.waiting === 1)
        );
        const third = await client.chat.completions
            .create({model: "tiny-thinker", messages: [{role: "user", content: "three"}]})
            .catch((err: unknown) => err);
        expect(third).toBeInstanceOf(OpenAI.RateLimitError);
        expect((third as Error).message).toMatch(/busy/);
        // The app's chat is refused too while the queue is full, rather than corrupting a running generation.
        const conversation = services.conversations.create();
        expect(() => services.chat.send(conversation.id, "hello")).toThrow(/busy/);
        await Promise.all([first, second]);
        expect(engine.requests.map((request) => request.history.at(-1)!.text)).toEqual(["one", "two"]);

        // With room in the queue the chat waits for a server request, then answers.
        const running = client.chat.completions.create({model: "tiny-thinker", messages: [{role: "user", content: "four"}]});
        await waitFor(() => engine.requests.length === 3);
        services.chat.send(conversation.id, "hello");
        await running;
        await services.chat.idle();
        expect(engine.requests.map((request) => request.history.at(-1)!.text)).toEqual(["one", "two", "four", "hello"]);
        expect(services.conversations.get(conversation.id).messages.at(-1)).toMatchObject({status: "complete", text: "The answer is 4"});
    });

    it("stops generating when the client aborts mid-stream", async () => {
        const {client, engine, logs} = await setup();
        engine.thought = Array.from({length: 2000}, () => " hm");
        const abort = new AbortController();
        const stream = await client.chat.completions.create(
            {model: "tiny-thinker", messages: [{role: "user", content: "long"}], stream: true},
            {signal: abort.signal}
        );
        let received = 0;
        await (async () => {
            for await (const _ of stream) {
                if (++received === 5) abort.abort();
            }
        })().catch(() => {});
        expect(received).toBeGreaterThanOrEqual(5);
        await waitFor(() => logs().some((entry) => entry.state === "aborted"));
        expect(engine.requests[0]!.signal.aborted).toBe(true);
        expect(logs().at(-1)!.thinkingTokens).toBeLessThan(2000);
    });

    it("logs a request whose client leaves while it waits in the queue as aborted (499), and never runs it", async () => {
        const {client, engine, services, logs} = await setup();
        engine.thought = Array.from({length: 150}, () => " hm");
        const first = client.chat.completions.create({model: "tiny-thinker", messages: [{role: "user", content: "one"}]});
        await waitFor(() => engine.requests.length === 1);
        const abort = new AbortController();
        const waiting = client.chat.completions
            .create({model: "tiny-thinker", messages: [{role: "user", content: "two"}]}, {signal: abort.signal})
            .catch((err: unknown) => err);
        await waitFor(() => services.queue.waiting === 1);
        abort.abort();
        await waiting;
        await waitFor(() => logs().some((entry) => entry.state === "aborted"));
        await first;
        const left = logs().filter((entry) => entry.state === "aborted");
        expect(left).toHaveLength(1);
        expect(left[0]).toMatchObject({httpStatus: 499, error: null});
        expect(
            logs()
                .filter((entry) => entry.id === left[0]!.id)
                .map((entry) => entry.state)
        ).toEqual(["queued", "aborted"]);
        expect(engine.requests.map((request) => request.history.at(-1)!.text)).toEqual(["one"]);
    });

    it("reports a failure mid-stream as an error event, and before the stream as an error status", async () => {
        const {client, engine, logs} = await setup();
        engine.failWith = new Error("the device was lost");
        const stream = await client.chat.completions.create({
            model: "tiny-thinker",
            messages: [{role: "user", content: "x"}],
            stream: true
        });
        let reasoning = "";
        const error = await (async () => {
            for await (const chunk of stream)
                reasoning += (chunk.choices[0]?.delta as {reasoning_content?: string} | undefined)?.reasoning_content ?? "";
        })().catch((err: unknown) => err);
        expect(reasoning).toBe("Let me");
        expect(error).toBeInstanceOf(OpenAI.APIError);
        expect((error as Error).message).toMatch(/the device was lost/);
        expect(logs().at(-1)).toMatchObject({state: "error", httpStatus: 500});

        const plain = await client.chat.completions
            .create({model: "tiny-thinker", messages: [{role: "user", content: "x"}]})
            .catch((err: unknown) => err);
        expect(plain).toBeInstanceOf(OpenAI.InternalServerError);
    });

    it("logs each request with its client, tokens and state", async () => {
        const {client, services} = await setup();
        await client.chat.completions.create({model: "tiny-thinker", messages: [{role: "user", content: "2+2?"}]});
        const [entry] = services.server.get().log;
        expect(entry).toMatchObject({
            method: "POST",
            path: "/v1/chat/completions",
            state: "done",
            httpStatus: 200,
            thinkingTokens: 3,
            answerTokens: 4
        });
        expect(entry!.client).toMatch(/127\.0\.0\.1/);
    });
});

/** A raw POST to /chat/completions (the openai client would not send these bodies). */
async function post(baseUrl: string, body: string, headers: Record<string, string>): Promise<{status: number; code: string | null}> {
    const http = await import("node:http");
    const url = new URL(`${baseUrl}/chat/completions`);
    return await new Promise((resolve, reject) => {
        const req = http.request(
            {
                host: url.hostname,
                port: url.port,
                path: url.pathname,
                method: "POST",
                headers: {"content-type": "application/json", ...headers}
            },
            (res) => {
                let text = "";
                res.on("data", (chunk: Buffer) => (text += chunk.toString()));
                res.on("end", () =>
                    resolve({status: res.statusCode ?? 0, code: (JSON.parse(text) as {error: {code: string | null}}).error.code})
                );
            }
        );
        req.on("error", reject);
        // In pieces, as a large upload arrives.
        for (let offset = 0; offset < body.length; offset += 256 * 1024) req.write(body.slice(offset, offset + 256 * 1024));
        req.end();
    });
}

async function waitFor(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
    const start = Date.now();
    while (!condition()) {
        if (Date.now() - start > timeoutMs) throw new Error("Timed out waiting");
        await new Promise((resolve) => setTimeout(resolve, 5));
    }
}
