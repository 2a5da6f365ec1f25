import {describe, expect, it} from "vitest";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {createDispatch} from "../../../main/ipc/dispatch.js";
import {createHandlers} from "../../../main/ipc/handlers.js";
import {recommendedSampling} from "../../../main/services/recommendedSampling.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {conversationSettingsSchema, defaultConversationSettings} from "../../../main/services/schemas.js";
import {FakeEngine} from "./FakeEngine.js";

const model = (name: string, architecture = "llama", declaredSampling?: Record<string, number>) => ({
    name,
    path: `/models/${name}.gguf`,
    architecture,
    declaredSampling
});

describe("recommended sampling", () => {
    it("takes what the GGUF declares over a family's card", () => {
        const declared = recommendedSampling(model("Qwen3-8B", "qwen3", {temperature: 0.7, topK: 30}));
        expect(declared).toMatchObject({
            source: "gguf",
            thinking: {temperature: 0.7, topK: 30, topP: 0.95, minP: 0, repeatPenalty: 1},
            nonThinking: null
        });
    });

    it("knows Qwen3 (thinking and not), R1-Distill and QwQ by name, and Qwen3 by architecture", () => {
        expect(recommendedSampling(model("Qwen3-4B-Q4_K_M", "qwen3"))).toMatchObject({
            source: "family",
            label: "Qwen3 model card",
            thinking: {temperature: 0.6, topP: 0.95, topK: 20, minP: 0},
            nonThinking: {temperature: 0.7, topP: 0.8, topK: 20, minP: 0}
        });
        expect(recommendedSampling(model("my finetune", "qwen3"))?.label).toBe("Qwen3 model card");
        expect(recommendedSampling(model("DeepSeek-R1-Distill-Qwen-7B", "qwen2"))).toMatchObject({
            label: "DeepSeek-R1 model card",
            thinking: {temperature: 0.6, topP: 0.95},
            nonThinking: null
        });
        expect(recommendedSampling(model("QwQ-32B", "qwen2"))?.thinking).toMatchObject({temperature: 0.6, topP: 0.95, topK: 40});
        expect(recommendedSampling(model("Qwen2.5-7B-Instruct", "qwen2"))).toBeNull();
        expect(recommendedSampling(model("Qwen3O", "llama"))).not.toBeNull();
        expect(recommendedSampling(model("Qwen30-thing", "llama"))).toBeNull();
    });
});

describe("sampling and thinking settings", () => {
    it("refuses out-of-range values with a reason a person can act on", () => {
        const check = (patch: object) =>
            conversationSettingsSchema.safeParse({...defaultConversationSettings, ...patch}).error?.issues[0]?.message;
        expect(check({topP: 0})).toMatch(/Top-p must be above 0/);
        expect(check({topK: 2.5})).toMatch(/whole number/);
        expect(check({minP: 1.5})).toMatch(/Min-p/);
        expect(check({repeatPenalty: 0.5})).toMatch(/Repeat penalty must be between 1 \(off\) and 2/);
        expect(check({seed: -1})).toMatch(/seed/);
        expect(check({thinkingBudget: 0})).toMatch(/at least 1 token/);
        expect(
            check({topP: 0.9, topK: 40, minP: 0.05, repeatPenalty: 1.1, seed: 42, thinking: false, thinkingBudget: 2048})
        ).toBeUndefined();
    });

    it("persists per conversation through IPC, refuses bad values as data and keeps the stored ones", async () => {
        const engine = new FakeEngine();
        const services = new AppServices(new AppDatabase(":memory:"), engine.asEngine(), () => {}, {
            version: "t",
            modelsDir: "/tmp/x",
            chat: {flushIntervalMs: 0}
        });
        const dispatch = createDispatch(createHandlers(services, {openExternal: async () => {}, pickModelFile: async () => null}));
        const c = services.conversations.create();
        const ok = await dispatch("conversations:updateSettings", {
            id: c.id,
            settings: {topK: 40, thinking: false, thinkingBudget: 512, seed: 7}
        });
        expect(ok).toMatchObject({ok: true, value: {topK: 40, thinking: false, thinkingBudget: 512, seed: 7}});
        const bad = await dispatch("conversations:updateSettings", {id: c.id, settings: {topP: 3}});
        expect(bad).toMatchObject({ok: false, error: {code: "BAD_REQUEST"}});
        expect(services.conversations.get(c.id).settings).toMatchObject({topK: 40, topP: 0.95, thinking: false});

        services.chat.send(c.id, "q");
        await services.chat.idle();
        expect(engine.requests[0]).toMatchObject({
            topK: 40,
            topP: 0.95,
            minP: 0,
            repeatPenalty: 1,
            seed: 7,
            thinking: {enabled: false, budget: 512}
        });
    });

    it("saves named presets, refuses two with one name, and drops only damaged presets", () => {
        const db = new AppDatabase(":memory:");
        const services = new AppServices(db, new FakeEngine().asEngine(), () => {}, {version: "t", modelsDir: "/tmp/x"});
        const preset = {name: "Precise", temperature: 0.2, topP: 0.9, topK: 20, minP: 0.05, repeatPenalty: 1.05};
        expect(services.settings.update({samplingPresets: [preset]}).samplingPresets).toEqual([preset]);
        expect(() => services.settings.update({samplingPresets: [preset, {...preset, name: "precise "}]})).toThrow(/same name/);
        db.settings.set("app", {...services.settings.get(), samplingPresets: [preset, {name: "", temperature: 9}]});
        expect(services.settings.get().samplingPresets).toEqual([]);
        expect(services.settings.get().defaultConversationSettings.topP).toBe(0.95);
    });
});
