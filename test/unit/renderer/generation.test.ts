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
    bridge.handle("conversations:updateSettings", ({settings: patch}) => ({ok: true, value: {...conversationSettings(), ...patch} as ConversationSettings}));
    return {bridge, conversations, settings, generation};
}

describe("generation settings state", () => {
    test("shows the conversation's settings, not dirty until edited", () => {
        const {generation} = setup();
        expect(generation.state.form).toEqual({systemPrompt: "", temperature: 0.6, maxTokens: 4096});
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
        expect(validateGenerationForm({systemPrompt: "x".repeat(20_001), temperature: 1, maxTokens: 10}).systemPrompt).toMatch(/at most 20,000/);
    });

    test("apply sends only the generation fields and the stored settings follow", async () => {
        const {bridge, conversations, generation} = setup();
        generation.set("systemPrompt", "Be brief.");
        generation.set("temperature", 0);
        generation.set("maxTokens", 512);
        expect(await generation.apply()).toBe(true);
        const call = bridge.calls.find((entry) => entry.channel === "conversations:updateSettings")!;
        expect(call.payload).toEqual({id: "c1", settings: {systemPrompt: "Be brief.", temperature: 0, maxTokens: 512}});
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
});
