// A KV budget above what the model can use (its trained context) is refused with the cap in words, with one code,
// wherever a budget enters: IPC (a conversation's settings, the defaults, the server's default), the API's
// `ponder.budget`; a stored one made for another model is capped when used. The rule is `main/kv/budgetCap.ts`.
import OpenAI from "openai";
import {afterEach, describe, expect, it} from "vitest";
import type {KvCacheType, Result} from "../../../preload/contract.js";
import {AppError} from "../../../main/AppError.js";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {budgetAboveCap, budgetCap, capBudget, kvBudgetExceeded} from "../../../main/kv/budgetCap.js";
import type {ModelInspection} from "../../../main/engine/EngineApi.js";
import {createDispatch} from "../../../main/ipc/dispatch.js";
import {createHandlers} from "../../../main/ipc/handlers.js";
import {toApiError} from "../../../main/server/openaiWire.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {estimateBudget} from "../../../main/services/CompressionService.js";
import {defaultCompressionSettings} from "../../../main/services/schemas.js";
import {FakeEngine} from "./FakeEngine.js";
import {serveApi} from "./serveApi.js";

const disposers: (() => Promise<void>)[] = [];
afterEach(async () => {
    for (const dispose of disposers.splice(0)) await dispose();
});

/** A 4,096-token model of 16 KiB of f16 KV per cell (4 layers, 2 KV heads of 512). */
const model: ModelInspection = {
    path: "/m.gguf",
    name: "tiny-thinker",
    sizeBytes: 1,
    architecture: "qwen2",
    contextLength: 4096,
    layers: 4,
    headCount: 8,
    headCountKv: 2,
    embeddingLength: 4096,
    hasChatTemplate: true
};

function setup(inspection: ModelInspection | null = model) {
    const engine = new FakeEngine();
    engine.inspection = inspection;
    engine.status = {
        ...engine.status,
        model: {
            id: "m1",
            path: "/models/tiny-thinker.gguf",
            name: "tiny",
            sizeBytes: 1,
            architecture: "qwen2",
            contextLength: 4096,
            addedAt: 0,
            lastUsedAt: null,
            crashedAt: null
        }
    };
    const services = new AppServices(new AppDatabase(":memory:"), engine.asEngine(), () => {}, {
        version: "t",
        modelsDir: "/tmp/ponder-cap-models"
    });
    disposers.push(() => services.dispose());
    const dispatch = createDispatch(createHandlers(services, {openExternal: async () => {}, pickModelFile: async () => null}));
    return {engine, services, dispatch};
}

const refused = {ok: false, error: {code: "BUDGET_ABOVE_CONTEXT"}};

describe("the budget cap", () => {
    it("is the model's context, or 1,048,576 cells without one; MiB are turned into cells of the cache type first", () => {
        expect(budgetCap(model)).toBe(4096);
        expect(budgetCap({contextLength: null})).toBe(1_048_576);
        expect(budgetCap({contextLength: 2 ** 24})).toBe(1_048_576);
        const budget = (b: object, kvType: KvCacheType = "f16", kvTypeV = kvType) =>
            budgetAboveCap(model, {budget: b as never, kvType, kvTypeV});
        expect(budget({kind: "cells", cells: 4096})).toBeNull();
        expect(budget({kind: "auto"})).toBeNull();
        expect(budget({kind: "cells", cells: 8000})).toEqual({
            code: "BUDGET_ABOVE_CONTEXT",
            message: "A KV budget of 8,000 cells is more than tiny-thinker can use: at most 4,096 cells, the model's context."
        });
        // 64 MiB of f16 is 4,096 cells; of q8_0 (17/32 of the bytes) it is 7,710.
        expect(budget({kind: "mib", mib: 64})).toBeNull();
        expect(budget({kind: "mib", mib: 64}, "q8_0")?.message).toBe(
            "A KV budget of 64 MiB is 7,710 cells of q8_0 KV, which is more than tiny-thinker can use: at most 34 MiB (4,096 cells), the model's context."
        );
        // K8V4: per layer a q8_0 K row of 1,024 values (32 blocks of 34 bytes) and a q4_0 V row (32 of 18): 4 x 1,664 = 6,656
        // bytes a cell, so 64 MiB is 10,082 cells and the cap 4,096 x 6,656 bytes = 26 MiB.
        expect(budget({kind: "mib", mib: 64}, "q8_0", "q4_0")?.message).toBe(
            "A KV budget of 64 MiB is 10,082 cells of q8_0 K / q4_0 V, which is more than tiny-thinker can use: at most 26 MiB (4,096 cells), the model's context."
        );
        expect(budget({kind: "mib", mib: 26}, "q8_0", "q4_0")).toBeNull();
        expect(capBudget(model, {budget: {kind: "cells", cells: 8000}, kvType: "f16", kvTypeV: "f16"})).toEqual({
            kind: "cells",
            cells: 4096
        });
        expect(capBudget(model, {budget: {kind: "cells", cells: 2048}, kvType: "f16", kvTypeV: "f16"})).toEqual({
            kind: "cells",
            cells: 2048
        });
    });

    it("caps a budget in the estimate, which says why and gives the cap; the memory it reports is for the capped cells", () => {
        const estimate = estimateBudget(model, {...defaultCompressionSettings, budget: {kind: "cells", cells: 1_048_576}}, 2 ** 34);
        expect(estimate).toMatchObject({
            cells: 4096,
            allocatedCells: 4096,
            bytes: 4096 * 16384,
            maxCells: 4096,
            aboveCap: {code: "BUDGET_ABOVE_CONTEXT"}
        });
        expect(estimate.notes.join(" ")).toMatch(/at most 4,096 cells, the model's context\. Until it is changed, 4,096 cells are used\./);
        expect(estimateBudget(model, {...defaultCompressionSettings, budget: {kind: "cells", cells: 4096}}, 2 ** 34).aboveCap).toBeNull();
    });

    it("Full KV's refusal of a conversation longer than its budget says what it needs, with its code", () => {
        const error = kvBudgetExceeded(891, 892);
        expect(error).toBeInstanceOf(AppError);
        expect(error.code).toBe("KV_BUDGET_EXCEEDED");
        expect(error.message).toBe(
            "This conversation is 891 tokens long: with Full KV it needs 907 cells (16 of them for the answer's first tokens), " +
                "more than the KV budget of 892 cells. Raise the budget above 907 cells or choose a compression policy."
        );
    });
});

describe("IPC", () => {
    it("refuses a conversation's budget above the loaded model's context, in cells or MiB, and keeps the stored one", async () => {
        const {services, dispatch} = setup();
        const {id} = services.conversations.create();
        const compression = (budget: object, kvType = "f16") => ({
            id,
            settings: {compression: {...defaultCompressionSettings, kvType, flashAttention: true, budget}}
        });
        const over = (await dispatch("conversations:updateSettings", compression({kind: "cells", cells: 8000}))) as Result<unknown>;
        expect(over).toMatchObject(refused);
        expect(!over.ok && over.error.message).toMatch(/at most 4,096 cells, the model's context/);
        expect(await dispatch("conversations:updateSettings", compression({kind: "mib", mib: 512}))).toMatchObject(refused);
        expect(await dispatch("conversations:updateSettings", compression({kind: "mib", mib: 64}, "q8_0"))).toMatchObject(refused);
        expect(
            await dispatch("conversations:updateSettings", {id, settings: {compression: {budget: {kind: "cells", cells: 1_048_576}}}})
        ).toMatchObject(refused);
        expect(services.conversations.get(id).settings.compression.budget).toEqual({kind: "auto"});
        expect(await dispatch("conversations:updateSettings", compression({kind: "cells", cells: 4096}))).toMatchObject({ok: true});
        expect(await dispatch("conversations:updateSettings", compression({kind: "mib", mib: 64}))).toMatchObject({ok: true});
    });

    it("refuses a default budget above the model's context; one stored before does not block other changes and is capped when used", async () => {
        const {services, dispatch, engine} = setup();
        const defaults = services.settings.get().defaultConversationSettings;
        const withBudget = (cells: number) => ({
            defaultConversationSettings: {...defaults, compression: {...defaults.compression, budget: {kind: "cells", cells}}}
        });
        expect(await dispatch("settings:update", withBudget(8000))).toMatchObject(refused);
        expect(services.settings.get().defaultConversationSettings.compression.budget).toEqual({kind: "auto"});

        // Without a model there is nothing to check against: stored as asked.
        engine.inspection = null;
        expect(await dispatch("settings:update", withBudget(8000))).toMatchObject({ok: true});
        engine.inspection = model;
        // Then another change of the defaults (the same budget) goes through, and a conversation made from them runs capped.
        const stored = services.settings.get().defaultConversationSettings;
        expect(await dispatch("settings:update", {defaultConversationSettings: {...stored, temperature: 0.2}})).toMatchObject({ok: true});
        const {id} = services.conversations.create();
        expect(await dispatch("conversations:updateSettings", {id, settings: {temperature: 0.3}})).toMatchObject({ok: true});
        expect((await services.compression.estimate(services.conversations.get(id).settings.compression)).cells).toBe(4096);
        services.chat.send(id, "hello");
        await services.chat.idle();
        expect(engine.requests.at(-1)?.kv.cells).toBe(4096);
    });

    it("refuses the API server's default budget above the model's context", async () => {
        const {services, dispatch} = setup();
        const over = (await dispatch("server:update", {budget: {kind: "cells", cells: 1_048_576}})) as Result<unknown>;
        expect(over).toMatchObject(refused);
        expect(services.server.settings().budget).toEqual({kind: "cells", cells: 4096});
        expect(await dispatch("server:update", {budget: {kind: "cells", cells: 2048}})).toMatchObject({ok: true});
    });
});

describe("the API", () => {
    async function serve(inspection: ModelInspection = model) {
        const context = setup(inspection);
        const {client, url} = await serveApi(context.services);
        return {...context, client, url};
    }

    const ask = (ponder?: object) => ({
        model: "tiny-thinker",
        messages: [{role: "user" as const, content: "2+2?"}],
        ...(ponder ? {ponder} : {})
    });

    it("refuses ponder.budget above the model's context with a 400, a stable code and the parameter, before the engine is asked", async () => {
        const {client, engine, url} = await serve();
        for (const budget of [{cells: 1_048_576}, {cells: 8000}, {mib: 512}]) {
            const error = await client.chat.completions
                .create(ask({policy: "full", budget}) as OpenAI.ChatCompletionCreateParamsNonStreaming)
                .catch((err: unknown) => err);
            expect(error, JSON.stringify(budget)).toBeInstanceOf(OpenAI.BadRequestError);
            expect(error).toMatchObject({code: "budget_above_context", param: "ponder.budget", type: "invalid_request_error"});
            expect((error as Error).message).toMatch(/at most (64 MiB \()?4,096 cells\)?, the model.s context/);
        }
        const completion = await fetch(`${url}/completions`, {
            method: "POST",
            headers: {"content-type": "application/json"},
            body: JSON.stringify({model: "tiny-thinker", prompt: "x", ponder: {budget: {cells: 4097}}})
        });
        expect(completion.status).toBe(400);
        expect(await completion.json()).toMatchObject({error: {code: "budget_above_context", param: "ponder.budget"}});
        expect(engine.requests).toHaveLength(0);
        const fits = await client.chat.completions.create(
            ask({policy: "full", budget: {cells: 4096}}) as OpenAI.ChatCompletionCreateParamsNonStreaming
        );
        expect((fits.usage as unknown as {kv: object}).kv).toMatchObject({budget_cells: 4096});
    });

    it("caps the server's default budget stored for a model with a longer context", async () => {
        const {client, services, engine} = await serve();
        engine.inspection = {...model, contextLength: 32768};
        await services.server.update({budget: {kind: "cells", cells: 16384}});
        engine.inspection = model;
        const completion = await client.chat.completions.create(ask());
        expect((completion.usage as unknown as {kv: object}).kv).toMatchObject({budget_cells: 4096});
        expect(engine.requests.at(-1)?.kv.cells).toBe(4096);
    });

    it("refuses a budget the fit estimate says does not fit in free memory with its own code", async () => {
        // 32 MiB of KV per cell: 4,096 cells are 128 GiB, more than this machine has free.
        const {client, engine} = await serve({...model, layers: 4096, headCountKv: 4, embeddingLength: 16384, headCount: 32});
        const error = await client.chat.completions
            .create(ask({budget: {cells: 4096 * 64}}) as OpenAI.ChatCompletionCreateParamsNonStreaming)
            .catch((err: unknown) => err);
        expect(error).toMatchObject({status: 400, code: "budget_above_context"});
        const big = await client.chat.completions
            .create(ask({budget: {cells: 4096}}) as OpenAI.ChatCompletionCreateParamsNonStreaming)
            .catch((err: unknown) => err);
        expect(big).toMatchObject({status: 400, code: "budget_does_not_fit", param: "ponder.budget"});
        expect(engine.requests).toHaveLength(0);
    });

    it("refuses a budget in MiB that rounds below the smallest budget as too small, not as too big", async () => {
        const {client, engine} = await serve();
        const error = await client.chat.completions
            .create(ask({budget: {mib: 0.001}}) as OpenAI.ChatCompletionCreateParamsNonStreaming)
            .catch((err: unknown) => err);
        expect(error).toMatchObject({status: 400, code: "budget_does_not_fit", param: "ponder.budget"});
        expect((error as Error).message).toMatch(
            /0\.001 MiB holds 0 cells of f16 KV, which is below the smallest budget of [\d.]+ MiB \(64 cells\)/
        );
        expect((error as Error).message).not.toMatch(/free memory/);
        expect(engine.requests).toHaveLength(0);
    });

    it("answers Full KV's refusal of a conversation longer than its budget as context_length_exceeded", () => {
        expect(toApiError(kvBudgetExceeded(891, 892))).toEqual({
            status: 400,
            error: {
                type: "invalid_request_error",
                code: "context_length_exceeded",
                param: "messages",
                message: kvBudgetExceeded(891, 892).message
            }
        });
    });
});
