import {describe, expect, test} from "vitest";
import type {ConversationSettings} from "../../../preload/contract.js";
import {validateGenerationForm} from "../../../renderer/lib/generationForm.js";
import {createConversations} from "../../../renderer/state/conversations.svelte.js";
import {createGeneration} from "../../../renderer/state/generation.svelte.js";
import {createSettings} from "../../../renderer/state/settings.svelte.js";
import {conversationSettings, createFakeBridge} from "./fakeBridge.js";

function setup() {
    const bridge = createFakeBridge();
    const conversations = createConversations(bridge.api);
    const settings = createSettings(bridge.api);
    const generation = createGeneration(bridge.api, conversations, settings);
    conversations.state.selectedId = "c1";
    conversations.state.settings = conversationSettings();
    generation.load("c1", conversations.state.settings);
    bridge.handle("conversations:updateSettings", ({settings: patch}) => ({
        ok: true,
        value: {...conversationSettings(), ...patch} as ConversationSettings
    }));
    return {bridge, conversations, settings, generation};
}

describe("generation settings state", () => {
    test("shows the conversation's settings, not dirty until edited", () => {
        const {generation} = setup();
        expect(generation.state.form).toEqual({
            systemPrompt: "",
            temperature: 0.6,
            topP: 0.95,
            topK: 20,
            minP: 0,
            repeatPenalty: 1,
            maxTokens: 4096,
            seed: null,
            thinking: true,
            thinkingBudget: null
        });
        expect(generation.dirty).toBe(false);
        generation.set("temperature", 0);
        expect(generation.dirty).toBe(true);
        expect(generation.valid).toBe(true);
    });

    test("refuses out-of-range values at the field and sends nothing", async () => {
        const {bridge, generation} = setup();
        generation.set("temperature", 3);
        generation.set("maxTokens", 0.5);
        expect(Object.keys(generation.errors).sort()).toEqual(["maxTokens", "temperature"]);
        expect(await generation.apply()).toBe(false);
        generation.set("temperature", Number.NaN);
        expect(generation.state.form?.temperature).toBeNull();
        expect(bridge.calls.filter((call) => call.channel === "conversations:updateSettings")).toHaveLength(0);
        const form = {...generation.state.form!, temperature: 1, maxTokens: 10};
        expect(validateGenerationForm({...form, systemPrompt: "x".repeat(20_001)}).systemPrompt).toMatch(/at most 20,000/);
        expect(
            Object.keys(
                validateGenerationForm({...form, topP: 0, topK: 1.5, minP: -1, repeatPenalty: 0.9, seed: -3, thinkingBudget: 0})
            ).sort()
        ).toEqual(["minP", "repeatPenalty", "seed", "thinkingBudget", "topK", "topP"]);
        // Empty seed and thinking budget mean "a new seed each time" and "no limit".
        expect(validateGenerationForm({...form, seed: null, thinkingBudget: null})).toEqual({});
    });

    test("explains every field in error, and closing the panel drops a draft that cannot be applied", async () => {
        const {generation} = setup();
        generation.set("temperature", 3);
        generation.set("topK", 1.5);
        generation.set("maxTokens", 0);
        // Three fields turn red: each has its own sentence, and the line by Apply counts them instead of naming one.
        expect(Object.keys(generation.errors).sort()).toEqual(["maxTokens", "temperature", "topK"]);
        expect(Object.values(generation.errors).every((text) => text.length > 20)).toBe(true);
        expect(generation.message).toBe("Correct the 3 fields marked in red to apply.");
        expect(generation.discardInvalid()).toBe(true);
        expect(generation.state.form).toMatchObject({temperature: 0.6, topK: 20, maxTokens: 4096});
        expect(generation.errors).toEqual({});
        expect(generation.message).toBeNull();

        // A valid draft not applied yet stays.
        generation.set("temperature", 1.2);
        expect(generation.discardInvalid()).toBe(false);
        expect(generation.state.form?.temperature).toBe(1.2);
        expect(generation.dirty).toBe(true);
        generation.set("temperature", 9);
        expect(generation.message).toBe("Correct the field marked in red to apply.");
    });

    test("apply sends only the generation fields and the stored settings follow", async () => {
        const {bridge, conversations, generation} = setup();
        generation.set("systemPrompt", "Be brief.");
        generation.set("temperature", 0);
        generation.set("maxTokens", 512);
        expect(await generation.apply()).toBe(true);
        const call = bridge.calls.find((entry) => entry.channel === "conversations:updateSettings")!;
        expect(call.payload).toEqual({
            id: "c1",
            settings: {
                systemPrompt: "Be brief.",
                temperature: 0,
                topP: 0.95,
                topK: 20,
                minP: 0,
                repeatPenalty: 1,
                maxTokens: 512,
                seed: null,
                thinking: true,
                thinkingBudget: null
            }
        });
        expect(conversations.state.settings?.temperature).toBe(0);
        expect(generation.dirty).toBe(false);
        expect(generation.state.notice).toMatch(/next answer/);
        // The panel hands the stored settings back after apply: the confirmation stays.
        generation.load("c1", conversations.state.settings);
        expect(generation.state.notice).toMatch(/next answer/);
    });

    test("a refusal from the backend is shown and the draft kept", async () => {
        const {bridge, generation} = setup();
        bridge.fail("conversations:updateSettings", "STORAGE", "disk full");
        generation.set("temperature", 1.2);
        expect(await generation.apply()).toBe(false);
        expect(generation.state.error).toBe("Not applied: disk full");
        expect(generation.state.form?.temperature).toBe(1.2);
    });

    test("another conversation replaces the draft; the same one reloaded keeps unapplied edits", () => {
        const {conversations, generation} = setup();
        generation.set("temperature", 1.5);
        const sameAgain = conversationSettings({maxTokens: 100});
        conversations.state.settings = sameAgain;
        generation.load("c1", sameAgain);
        expect(generation.state.form?.temperature).toBe(1.5);
        const other = conversationSettings({temperature: 0.2});
        conversations.state.selectedId = "c2";
        conversations.state.settings = other;
        generation.load("c2", other);
        expect(generation.state.form?.temperature).toBe(0.2);
    });

    test("recommended values and presets fill the draft's sampling fields only", async () => {
        const {bridge, settings, generation} = setup();
        const qwen3 = {temperature: 0.6, topP: 0.95, topK: 20, minP: 0, repeatPenalty: 1};
        bridge.reply("generation:capabilities", {
            thinkingToggle: true,
            recommended: {source: "family", label: "Qwen3 model card", thinking: qwen3, nonThinking: null}
        });
        await generation.refreshCapabilities();
        expect(generation.state.capabilities?.recommended?.label).toBe("Qwen3 model card");
        generation.set("maxTokens", 999);
        generation.useSampling({temperature: 1.1, topP: 0.8, topK: 5, minP: 0.1, repeatPenalty: 1.2});
        expect(generation.state.form).toMatchObject({temperature: 1.1, topP: 0.8, topK: 5, minP: 0.1, repeatPenalty: 1.2, maxTokens: 999});

        let stored: unknown[] = [
            {name: "Old", ...qwen3},
            {name: "Creative", ...qwen3}
        ];
        settings.state.samplingPresets = stored as typeof settings.state.samplingPresets;
        bridge.handle("settings:update", (patch) => {
            stored = patch.samplingPresets ?? stored;
            return {
                ok: true,
                value: {
                    theme: "system",
                    defaultModelId: null,
                    defaultConversationSettings: conversationSettings(),
                    samplingPresets: stored as never,
                    stateDiskBudgetMib: 4096
                }
            };
        });
        expect(await generation.savePreset("  ")).toBe(false);
        expect(generation.state.error).toMatch(/Name the preset/);
        expect(await generation.savePreset("creative")).toBe(true);
        expect(settings.state.samplingPresets.map((preset) => preset.name)).toEqual(["Old", "creative"]);
        expect(settings.state.samplingPresets[1]).toMatchObject({temperature: 1.1, topK: 5});
        generation.set("topP", 0);
        expect(await generation.savePreset("broken")).toBe(false);
        expect(generation.state.error).toMatch(/Correct the sampling values/);
        expect(await generation.deletePreset("Old")).toBe(true);
        expect(settings.state.samplingPresets.map((preset) => preset.name)).toEqual(["creative"]);
    });

    test("without a model there is nothing to recommend", async () => {
        const {bridge, generation} = setup();
        bridge.reply("generation:capabilities", null);
        await generation.refreshCapabilities();
        expect(generation.state.capabilities).toBeNull();
    });
});
