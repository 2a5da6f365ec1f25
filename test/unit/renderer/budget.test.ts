import {afterEach, beforeEach, describe, expect, test, vi} from "vitest";
import type {BudgetEstimate, CompressionSettings, Result} from "../../../preload/contract.js";
import {policyDefaults} from "../../../renderer/lib/policies.js";
import {describeTrainedBudget} from "../../../renderer/lib/describeTrainedBudget.js";
import {createBudget} from "../../../renderer/state/budget.svelte.js";
import {createConversations} from "../../../renderer/state/conversations.svelte.js";
import {createSettings} from "../../../renderer/state/settings.svelte.js";
import {conversationSettings, createFakeBridge} from "./fakeBridge.js";

const bytesPerCell = 131_072;

/** As the backend estimates, on a model of `context` tokens: a budget above it is capped, and says why. */
function estimateOf(compression: CompressionSettings, context = 4096): BudgetEstimate {
    const asked =
        compression.budget.kind === "cells"
            ? compression.budget.cells
            : compression.budget.kind === "mib"
              ? Math.floor((compression.budget.mib * 1024 * 1024) / bytesPerCell)
              : context;
    const cells = Math.min(asked, context);
    return {
        cells,
        allocatedCells: cells,
        bytesPerCell,
        bytes: cells * bytesPerCell,
        fullContextBytes: context * bytesPerCell,
        modelContextLength: context,
        maxCells: context,
        aboveCap: asked > context ? {code: "BUDGET_ABOVE_CONTEXT", message: "more than the model can use"} : null,
        freeMemoryBytes: 2 ** 30,
        weightsBytes: 2 ** 20,
        computeBytes: 2 ** 20,
        modelLoaded: true,
        neededBytes: cells * bytesPerCell + 2 ** 20,
        fits: cells * bytesPerCell + 2 ** 20 <= 2 ** 30,
        compressionSupported: true,
        notes: []
    };
}

function setup(options: {conversationTokens?: () => number | null} = {}) {
    const bridge = createFakeBridge();
    bridge.handle("compression:estimate", ({compression}) => ({ok: true, value: estimateOf(compression)}));
    const conversations = createConversations(bridge.api);
    const settings = createSettings(bridge.api);
    const budget = createBudget(bridge.api, conversations, settings, {debounceMs: 300, ...options});
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

    test("per-head cells go back to the policy's own combining when the policy changes to one that prunes without them", async () => {
        const {budget} = setup();
        await vi.advanceTimersByTimeAsync(0);
        budget.setPolicy("trimkv");
        budget.setOption("combine", "heads");
        budget.setPolicy("full");
        expect(budget.state.form?.combine).toBe("heads");
        budget.setPolicy("trimkv");
        expect(budget.state.form?.combine).toBe("heads");
        budget.setPolicy("h2o");
        expect(budget.state.form?.combine).toBe("heads");
        budget.setPolicy("lava");
        expect(budget.state.form?.combine).toBe("auto");
    });

    test("an older estimate answering late does not replace a newer one", async () => {
        const {bridge, budget} = setup();
        await vi.advanceTimersByTimeAsync(0);
        const pending: (() => void)[] = [];
        bridge.handle(
            "compression:estimate",
            ({compression}) =>
                new Promise<Result<BudgetEstimate>>((resolve) => pending.push(() => resolve({ok: true, value: estimateOf(compression)})))
        );
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

    test("a budget above the model's context is refused inline with the cap in words, still estimated, and not applied", async () => {
        const {bridge, budget, estimates} = setup();
        await vi.advanceTimersByTimeAsync(0);
        budget.setBudgetKind("cells");
        expect(budget.capHint).toBe("At most 4,096 cells: the model's context.");
        budget.setBudgetValue(4096);
        expect(budget.valid).toBe(true);
        budget.setBudgetValue(8000);
        expect(budget.errors.budget).toBe("8,000 cells is more than this model can use. At most 4,096 cells: the model's context.");
        expect(budget.message).toBe(budget.errors.budget);
        expect(budget.valid).toBe(false);
        // Estimated all the same: the estimate shows the capped cells (and a later, larger model can lift the error).
        await vi.advanceTimersByTimeAsync(300);
        expect((estimates().at(-1)?.payload as {compression: CompressionSettings}).compression.budget).toEqual({
            kind: "cells",
            cells: 8000
        });
        expect(budget.state.estimate?.cells).toBe(4096);
        expect(await budget.apply()).toBe(false);
        expect(await budget.saveAsDefault()).toBe(false);
        expect(bridge.calls.some((call) => call.channel === "conversations:updateSettings" || call.channel === "settings:update")).toBe(
            false
        );

        // A MiB budget is turned into cells of the cache type first: 1,024 MiB at 128 KiB a cell is 8,192 cells.
        budget.setBudgetKind("mib");
        budget.setBudgetValue(1024);
        expect(budget.errors.budget).toBe(
            "1,024 MiB is more than this model can use. At most 512 MiB of f16 KV (4,096 cells): the model's context."
        );
        budget.setBudgetValue(512);
        expect(budget.errors.budget).toBeUndefined();
        expect(budget.capHint).toBe("At most 512 MiB of f16 KV (4,096 cells): the model's context.");
    });

    test("a model with a longer context lifts the cap at its next estimate", async () => {
        const {bridge, budget} = setup();
        await vi.advanceTimersByTimeAsync(0);
        budget.setBudgetKind("cells");
        budget.setBudgetValue(8000);
        expect(budget.valid).toBe(false);
        bridge.handle("compression:estimate", ({compression}) => ({ok: true, value: estimateOf(compression, 32768)}));
        await budget.estimate();
        expect(budget.errors.budget).toBeUndefined();
        expect(budget.valid).toBe(true);
        expect(budget.capHint).toBe("At most 32,768 cells: the model's context.");
        // Without a model there is no cap to check against: the backend checks when one is loaded.
        bridge.fail("compression:estimate", "MODEL_NOT_LOADED", "Load a model (or name one) to estimate a budget");
        await budget.estimate();
        expect(budget.capHint).toBeNull();
    });

    test("flags a conversation longer than the budget: Full KV refuses the next message, a pruning policy prunes it", async () => {
        let tokens: number | null = 1000;
        const {budget} = setup({conversationTokens: () => tokens});
        await vi.advanceTimersByTimeAsync(0);
        // auto: 4,096 cells hold it.
        expect(budget.historyNote).toBeNull();
        budget.setBudgetKind("cells");
        budget.setBudgetValue(1010);
        expect(budget.historyNote).toBe(
            "This conversation is already about 1,000 tokens: with Full KV 1,010 cells cannot hold it and an answer, so the next " +
                "message (or a continuation) is refused. Raise the budget or choose a compression policy."
        );
        budget.setPolicy("lethe");
        expect(budget.historyNote).toBeNull();
        budget.setBudgetValue(512);
        expect(budget.historyNote).toBe(
            "This conversation is already about 1,000 tokens, more than 512 cells: it is pruned as it is read, so parts of it can be lost."
        );
        // A warning, not an error: the budget can still be applied.
        expect(budget.valid).toBe(true);
        tokens = null;
        budget.setBudgetValue(256);
        expect(budget.historyNote).toBeNull();
    });

    test("a quantized V cache turns flash attention on, and turning it off again is caught before the backend", () => {
        const {budget} = setup();
        expect(budget.state.form!.flashAttention).toBe(false);
        // Quantized keys alone: llama.cpp makes them without flash attention.
        budget.setOption("kvType", "q8_0");
        expect(budget.state.form!.flashAttention).toBe(false);
        expect(budget.valid).toBe(true);
        budget.setOption("kvTypeV", "q8_0");
        expect(budget.state.form!.flashAttention).toBe(true);
        expect(budget.valid).toBe(true);
        budget.setOption("flashAttention", false);
        expect(budget.valid).toBe(false);
        expect(budget.errors.flashAttention).toMatch(/V cache .* needs flash attention/);
        budget.setOption("kvTypeV", "f16");
        budget.setOption("flashAttention", false);
        expect(budget.valid).toBe(true);
    });

    test("names the policies the loaded model cannot run, with why: TRIM-KV without gates trained for it", async () => {
        const {budget, bridge} = setup();
        await vi.advanceTimersByTimeAsync(0);
        expect(budget.unavailable).toEqual({});
        const reason = "no retention gates beside this model (expected /models/m.retention.gguf)";
        bridge.handle("compression:estimate", ({compression}) => ({
            ok: true,
            value: {...estimateOf(compression), unavailablePolicies: [{policy: "trimkv", reason}]}
        }));
        budget.setPolicy("trimkv");
        await vi.advanceTimersByTimeAsync(300);
        expect(budget.unavailable).toEqual({trimkv: reason});
        // TRIM-KV has no parameters to tune: its gates are learned.
        expect(budget.state.form?.policy).toBe("trimkv");
        expect(budget.valid).toBe(true);
    });

    test("TRIM-KV chosen for a model whose gates say their trained budget: that many cells offered, with where it comes from", async () => {
        const {budget, bridge} = setup();
        const trainedBudget = {cells: 512, source: "converted from trimkv_weights.pth"};
        bridge.handle("compression:estimate", ({compression}) => ({ok: true, value: {...estimateOf(compression), trainedBudget}}));
        await vi.advanceTimersByTimeAsync(0);
        // Another policy: nothing offered.
        expect(budget.trainedBudget).toBeNull();
        budget.setPolicy("trimkv");
        await vi.advanceTimersByTimeAsync(300);
        expect(budget.trainedBudget).toEqual({
            cells: 512,
            line: "These TRIM-KV gates were trained with 512 cells: memory_size in the config.json of the authors' released gates."
        });
        budget.useTrainedBudget();
        expect(budget.state.form).toMatchObject({policy: "trimkv", budgetKind: "cells", cells: 512});
        // Taken: no longer offered.
        expect(budget.trainedBudget).toBeNull();
        budget.setBudgetValue(2048);
        expect(budget.trainedBudget?.cells).toBe(512);
        // Gates that do not say (budget 0 in the sidecar): nothing offered.
        bridge.handle("compression:estimate", ({compression}) => ({ok: true, value: {...estimateOf(compression), trainedBudget: null}}));
        await vi.advanceTimersByTimeAsync(300);
        expect(budget.trainedBudget).toBeNull();
        expect(describeTrainedBudget({cells: 4096, source: "calibrated on 38 thoughts"})).toBe(
            "These TRIM-KV gates were trained with 4,096 cells: the budget recorded with the gates (calibrated on 38 thoughts)."
        );
    });

    test("K8V4, LeanKV's pair, in one step: Q8_0 keys, Q4_0 values, flash attention on", () => {
        const {budget} = setup();
        budget.setPolicy("leankv");
        budget.useLeanKvPair();
        expect(budget.state.form).toMatchObject({policy: "leankv", kvType: "q8_0", kvTypeV: "q4_0", flashAttention: true});
        expect(budget.valid).toBe(true);
        expect(budget.dirty).toBe(true);
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
            ok: true,
            value: conversationSettings({compression: settings.compression as CompressionSettings})
        }));
        conversations.state.items = [{id: "c1", title: "t", createdAt: 0, updatedAt: 0, messageCount: 0, policy: "full"}];
        budget.setPolicy("refreekv");
        budget.setBudgetKind("mib");
        budget.setBudgetValue(256);
        budget.setParam("refreekv", "threshold", 0.02);
        budget.setRefreeKvMode("rounds");
        expect(await budget.apply()).toBe(true);
        const call = bridge.calls.find((entry) => entry.channel === "conversations:updateSettings");
        expect(call?.payload).toMatchObject({id: "c1", settings: {compression: {policy: "refreekv", budget: {kind: "mib", mib: 256}}}});
        expect(conversations.state.settings?.compression.params.refreekv).toMatchObject({threshold: 0.02, mode: "rounds"});
        // The list names the conversation's policy.
        expect(conversations.state.items[0]?.policy).toBe("refreekv");
        expect(budget.dirty).toBe(false);
        // It says which conversations it affects: this one, from its next answer; not the others, not new ones.
        expect(budget.state.notice).toBe(
            "Applied to this conversation: its next answer runs under ReFreeKV, 256 MiB. " +
                "Other conversations keep their own settings, and new ones start with the defaults."
        );
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
        expect(budget.state.form?.combine).toBe("auto");
        expect(budget.valid).toBe(true);
    });

    test("says that new conversations start under TRIM-KV when the model has retention gates and no default was saved", async () => {
        const {bridge, conversations, settings, budget} = setup();
        const defaults = conversationSettings();
        bridge.reply("settings:get", {
            theme: "dark",
            defaultModelId: null,
            defaultConversationSettings: defaults,
            samplingPresets: [],
            stateDiskBudgetMib: 4096
        });
        await settings.load();
        const gates = {...defaults.compression, policy: "trimkv" as const, budget: {kind: "cells" as const, cells: 320}};
        bridge.reply("compression:newConversation", {compression: gates, source: "gates"});
        await budget.estimate();
        await vi.advanceTimersByTimeAsync(0);
        expect(budget.scope).toBe(
            "Apply changes this conversation only, from its next answer. New conversations with this model start with " +
                "TRIM-KV, 320 cells (it has retention gates, and no default was saved); Save as default to change that."
        );
        // A conversation that started so: the same settings.
        conversations.state.settings = conversationSettings({compression: gates});
        budget.load("c2", conversations.state.settings);
        expect(budget.scope).toBe(
            "Apply changes this conversation only, from its next answer. New conversations with this model start with " +
                "these settings too (it has retention gates, and no default was saved)."
        );
        // Once a default is saved, it is what new conversations start with.
        bridge.reply("compression:newConversation", {compression: defaults.compression, source: "default"});
        await budget.estimate();
        await vi.advanceTimersByTimeAsync(0);
        expect(budget.scope).toBe(
            "Apply changes this conversation only, from its next answer. New conversations start with Full KV, auto budget; " +
                "Save as default to change that."
        );
    });

    test("save as default changes the settings of new conversations only", async () => {
        const {bridge, settings, budget} = setup();
        const defaults = conversationSettings({temperature: 0.3});
        bridge.reply("settings:get", {
            theme: "dark",
            defaultModelId: null,
            defaultConversationSettings: defaults,
            samplingPresets: [],
            stateDiskBudgetMib: 4096
        });
        bridge.handle("settings:update", (patch) => ({
            ok: true,
            value: {
                theme: "dark",
                defaultModelId: null,
                defaultConversationSettings: patch.defaultConversationSettings ?? defaults,
                samplingPresets: [],
                stateDiskBudgetMib: 4096
            }
        }));
        budget.setPolicy("streamingllm");
        budget.setParam("streamingllm", "sinks", 8);
        expect(await budget.saveAsDefault()).toBe(true);
        const update = bridge.calls.find((call) => call.channel === "settings:update")?.payload as {
            defaultConversationSettings: typeof defaults;
        };
        expect(update.defaultConversationSettings.temperature).toBe(0.3);
        expect(update.defaultConversationSettings.compression.policy).toBe("streamingllm");
        expect(update.defaultConversationSettings.compression.params.streamingllm.sinks).toBe(8);
        expect(settings.state.conversationDefaults?.compression.policy).toBe("streamingllm");
        expect(budget.state.notice).toBe(
            "Saved: new conversations start with StreamingLLM, auto budget. Existing conversations keep their own " +
                "settings; Apply to this conversation to use it here too."
        );
        expect(budget.scope).toBe(
            "Apply changes this conversation only, from its next answer. " +
                "New conversations start with these settings too (the saved default)."
        );
        budget.setPolicy("h2o");
        expect(budget.scope).toBe(
            "Apply changes this conversation only, from its next answer. " +
                "New conversations start with StreamingLLM, auto budget; Save as default to change that."
        );
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
