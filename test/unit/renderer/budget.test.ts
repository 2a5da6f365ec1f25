import {afterEach, beforeEach, describe, expect, test, vi} from "vitest";
import type {BudgetEstimate, CompressionSettings, Result} from "../../../preload/contract.js";
import {policyDefaults} from "../../../renderer/lib/policies.js";
import {createBudget} from "../../../renderer/state/budget.svelte.js";
import {createConversations} from "../../../renderer/state/conversations.svelte.js";
import {createSettings} from "../../../renderer/state/settings.svelte.js";
import {conversationSettings, createFakeBridge} from "./fakeBridge.js";

const bytesPerCell = 131_072;

function estimateOf(compression: CompressionSettings): BudgetEstimate {
    const cells = compression.budget.kind === "cells" ? compression.budget.cells
        : compression.budget.kind === "mib" ? Math.floor((compression.budget.mib * 1024 * 1024) / bytesPerCell) : 4096;
    return {
        cells, allocatedCells: cells, bytesPerCell, bytes: cells * bytesPerCell, fullContextBytes: 4096 * bytesPerCell, modelContextLength: 4096,
        freeMemoryBytes: 2 ** 30, weightsBytes: 2 ** 20, computeBytes: 2 ** 20, modelLoaded: true, neededBytes: cells * bytesPerCell + 2 ** 20,
        fits: cells * bytesPerCell + 2 ** 20 <= 2 ** 30, compressionSupported: true, notes: []
    };
}

function setup() {
    const bridge = createFakeBridge();
    bridge.handle("compression:estimate", ({compression}) => ({ok: true, value: estimateOf(compression)}));
    const conversations = createConversations(bridge.api);
    const settings = createSettings(bridge.api);
    const budget = createBudget(bridge.api, conversations, settings, {debounceMs: 300});
    conversations.state.selectedId = "c1";
    conversations.state.settings = conversationSettings();
    budget.load("c1", conversations.state.settings);
    const estimates = () => bridge.calls.filter((call) => call.channel === "compression:estimate");
    return {bridge, conversations, settings, budget, estimates};
}

beforeEach(() => {
    vi.useFakeTimers();
});

afterEach(() => {
    vi.useRealTimers();
});

describe("budget controller state", () => {
    test("loading a conversation shows its settings and estimates them at once", async () => {
        const {budget, estimates} = setup();
        await vi.advanceTimersByTimeAsync(0);
        expect(budget.state.form?.policy).toBe("full");
        expect(budget.state.form?.budgetKind).toBe("auto");
        expect(estimates()).toHaveLength(1);
        expect(budget.state.estimate?.cells).toBe(4096);
        expect(budget.dirty).toBe(false);
    });

    test("edits are estimated once, after 300 ms of quiet, with the latest values", async () => {
        const {budget, estimates} = setup();
        await vi.advanceTimersByTimeAsync(0);
        budget.setPolicy("lethe");
        budget.setBudgetKind("cells");
        budget.setBudgetValue(1000);
        await vi.advanceTimersByTimeAsync(200);
        budget.setBudgetValue(2048);
        await vi.advanceTimersByTimeAsync(299);
        expect(estimates()).toHaveLength(1);
        expect(budget.stale).toBe(true);
        await vi.advanceTimersByTimeAsync(1);
        expect(estimates()).toHaveLength(2);
        const sent = estimates().at(-1)?.payload as {compression: CompressionSettings};
        expect(sent.compression.policy).toBe("lethe");
        expect(sent.compression.budget).toEqual({kind: "cells", cells: 2048});
        expect(budget.state.estimate?.bytes).toBe(2048 * bytesPerCell);
        expect(budget.stale).toBe(false);
        expect(budget.dirty).toBe(true);
    });

    test("an older estimate answering late does not replace a newer one", async () => {
        const {bridge, budget} = setup();
        await vi.advanceTimersByTimeAsync(0);
        const pending: (() => void)[] = [];
        bridge.handle("compression:estimate", ({compression}) => new Promise<Result<BudgetEstimate>>((resolve) =>
            pending.push(() => resolve({ok: true, value: estimateOf(compression)}))));
        budget.setBudgetKind("cells");
        budget.setBudgetValue(1000);
        await vi.advanceTimersByTimeAsync(300);
        budget.setBudgetValue(3000);
        await vi.advanceTimersByTimeAsync(300);
        pending[1]!();
        await vi.advanceTimersByTimeAsync(0);
        pending[0]!();
        await vi.advanceTimersByTimeAsync(0);
        expect(budget.state.estimate?.cells).toBe(3000);
    });

    test("switching the budget's unit shows the same budget in the new unit", async () => {
        const {budget} = setup();
        await vi.advanceTimersByTimeAsync(0);
        budget.setBudgetKind("cells");
        expect(budget.budgetValue()).toBe(4096);
        await vi.advanceTimersByTimeAsync(300);
        budget.setBudgetKind("mib");
        expect(budget.budgetValue()).toBe(512);
    });

    test("obvious mistakes are caught with readable messages, and not sent anywhere", async () => {
        const {bridge, budget, estimates} = setup();
        await vi.advanceTimersByTimeAsync(0);
        budget.setBudgetKind("cells");
        const messages = new Map<number | null, string>([
            [null, "Enter the budget as a number of cells (tokens), for example 4096."],
            [-5, "A budget needs at least 64 cells to hold the sinks, a recent window and the prompt."],
            [0, "A budget needs at least 64 cells to hold the sinks, a recent window and the prompt."],
            [100.5, "Cells are whole tokens: enter a whole number."],
            [2_000_000, "At most 1,048,576 cells."]
        ]);
        for (const [value, message] of messages) {
            budget.setBudgetValue(value);
            expect(budget.errors.budget).toBe(message);
            expect(budget.message).toBe(message);
            expect(budget.valid).toBe(false);
        }
        budget.setBudgetKind("mib");
        budget.setBudgetValue(0);
        expect(budget.message).toBe("A budget must be more than 0 MiB.");

        budget.setBudgetValue(64);
        budget.setPolicy("lethe");
        budget.setParam("lethe", "gamma", 1.5);
        expect(budget.errors["params.lethe.gamma"]).toBe("Decay γ must be above 0 and at most 1.");
        budget.setParam("lethe", "gamma", 0.9);
        budget.setParam("lethe", "segments", 2.5);
        expect(budget.message).toBe("Segments D must be a whole number.");
        budget.setParam("lethe", "segments", 8);
        budget.setOption("pruneEvery", 0);
        expect(budget.message).toBe("Prune every 1 to 4096 generated tokens (a whole number).");

        await vi.advanceTimersByTimeAsync(1000);
        expect(estimates()).toHaveLength(1);
        expect(await budget.apply()).toBe(false);
        expect(bridge.calls.some((call) => call.channel === "conversations:updateSettings")).toBe(false);
    });

    test("a quantized cache turns flash attention on, and turning it off again is caught before the backend", () => {
        const {budget} = setup();
        expect(budget.state.form!.flashAttention).toBe(false);
        budget.setOption("kvType", "q8_0");
        expect(budget.state.form!.flashAttention).toBe(true);
        expect(budget.valid).toBe(true);
        budget.setOption("flashAttention", false);
        expect(budget.valid).toBe(false);
        expect(budget.errors.flashAttention).toMatch(/needs flash attention/);
        budget.setOption("kvType", "f16");
        budget.setOption("flashAttention", false);
        expect(budget.valid).toBe(true);
    });

    test("another policy's parameters do not block this one", () => {
        const {budget} = setup();
        budget.setPolicy("h2o");
        budget.setParam("lethe", "gamma", 7);
        expect(budget.valid).toBe(true);
    });

    test("apply stores the draft as the conversation's settings", async () => {
        const {bridge, conversations, budget} = setup();
        bridge.handle("conversations:updateSettings", ({settings}) => ({
            ok: true, value: conversationSettings({compression: settings.compression as CompressionSettings})
        }));
        budget.setPolicy("refreekv");
        budget.setBudgetKind("mib");
        budget.setBudgetValue(256);
        budget.setParam("refreekv", "threshold", 0.02);
        budget.setRefreeKvMode("rounds");
        expect(await budget.apply()).toBe(true);
        const call = bridge.calls.find((entry) => entry.channel === "conversations:updateSettings");
        expect(call?.payload).toMatchObject({id: "c1", settings: {compression: {policy: "refreekv", budget: {kind: "mib", mib: 256}}}});
        expect(conversations.state.settings?.compression.params.refreekv).toMatchObject({threshold: 0.02, mode: "rounds"});
        expect(budget.dirty).toBe(false);
        expect(budget.state.notice).toBe("Applied. It takes effect with the next answer.");
        // Loading the same (now stored) settings again keeps the form and its notice.
        budget.load("c1", conversations.state.settings);
        expect(budget.state.notice).not.toBeNull();
    });

    test("the backend's refusal is shown as it was given", async () => {
        const {bridge, budget} = setup();
        bridge.fail("conversations:updateSettings", "BAD_REQUEST", "A KV budget below 64 cells cannot hold a prompt and a recent window");
        budget.setPolicy("h2o");
        expect(await budget.apply()).toBe(false);
        expect(budget.message).toBe("Not applied: A KV budget below 64 cells cannot hold a prompt and a recent window");
        // Editing clears it.
        budget.setPolicy("lethe");
        expect(budget.message).toBeNull();
    });

    test("reset puts the chosen policy's paper defaults back", () => {
        const {budget} = setup();
        budget.setPolicy("lethe");
        budget.setParam("lethe", "sparseRatio", 10);
        budget.setParam("lethe", "gamma", null);
        budget.setOption("pruneEvery", 64);
        budget.setOption("combine", "union");
        budget.resetDefaults();
        expect(budget.state.form?.params.lethe).toEqual(policyDefaults.lethe);
        expect(budget.state.form?.pruneEvery).toBe(16);
        expect(budget.state.form?.combine).toBe("aggregate");
        expect(budget.valid).toBe(true);
    });

    test("save as default changes the settings of new conversations only", async () => {
        const {bridge, settings, budget} = setup();
        const defaults = conversationSettings({temperature: 0.3});
        bridge.reply("settings:get", {theme: "dark", defaultModelId: null, defaultConversationSettings: defaults, samplingPresets: []});
        bridge.handle("settings:update", (patch) => ({
            ok: true, value: {theme: "dark", defaultModelId: null, defaultConversationSettings: patch.defaultConversationSettings ?? defaults, samplingPresets: []}
        }));
        budget.setPolicy("streamingllm");
        budget.setParam("streamingllm", "sinks", 8);
        expect(await budget.saveAsDefault()).toBe(true);
        const update = bridge.calls.find((call) => call.channel === "settings:update")?.payload as {defaultConversationSettings: typeof defaults};
        expect(update.defaultConversationSettings.temperature).toBe(0.3);
        expect(update.defaultConversationSettings.compression.policy).toBe("streamingllm");
        expect(update.defaultConversationSettings.compression.params.streamingllm.sinks).toBe(8);
        expect(settings.state.conversationDefaults?.compression.policy).toBe("streamingllm");
        expect(budget.state.notice).toBe("Saved as the default for new conversations.");
        expect(bridge.calls.some((call) => call.channel === "conversations:updateSettings")).toBe(false);

        bridge.fail("settings:update", "STORAGE", "disk full");
        expect(await budget.saveAsDefault()).toBe(false);
        expect(budget.message).toBe("Could not save the defaults: disk full");
    });

    test("without a loaded model the estimate says so", async () => {
        const {bridge, budget} = setup();
        bridge.fail("compression:estimate", "MODEL_NOT_LOADED", "Load a model (or name one) to estimate a budget");
        await budget.estimate();
        expect(budget.state.estimate).toBeNull();
        expect(budget.state.estimateError).toBe("Load a model to see what this budget means for it.");
    });
});
