import {describe, expect, test} from "vitest";
import type {AppSettings} from "../../../preload/contract.js";
import {describeResumed, describeSavedState} from "../../../renderer/lib/describeSavedState.js";
import {formatDiskBudget, parseDiskBudget} from "../../../renderer/lib/diskBudget.js";
import {createChat} from "../../../renderer/state/chat.svelte.js";
import {createMemory} from "../../../renderer/state/memory.svelte.js";
import {createSavedStates} from "../../../renderer/state/savedStates.svelte.js";
import {conversationSettings, createFakeBridge, kvSample, message} from "./fakeBridge.js";

const mib = 1024 * 1024;

describe("the saved states' disk budget as typed", () => {
    test("GiB and MiB as the app writes them, a bare number in GiB, 0 to save none", () => {
        expect(parseDiskBudget("4 GiB")).toEqual({ok: true, mib: 4096});
        expect(parseDiskBudget("1.5 GiB")).toEqual({ok: true, mib: 1536});
        expect(parseDiskBudget("512 MiB")).toEqual({ok: true, mib: 512});
        expect(parseDiskBudget("8")).toEqual({ok: true, mib: 8192});
        expect(parseDiskBudget("0")).toEqual({ok: true, mib: 0});
        for (const bad of ["", "-1 GiB", "lots", "4 TB", "0.0001 MiB", "2000 GiB"]) expect(parseDiskBudget(bad).ok).toBe(false);
        expect(formatDiskBudget(4096)).toBe("4 GiB");
        expect(formatDiskBudget(1536)).toBe("1.5 GiB");
        expect(formatDiskBudget(512)).toBe("512 MiB");
    });
});

describe("saved states state", () => {
    function setup() {
        const bridge = createFakeBridge();
        let settings: AppSettings = {
            theme: "system",
            defaultModelId: null,
            defaultConversationSettings: conversationSettings(),
            samplingPresets: [],
            stateDiskBudgetMib: 4096
        };
        let usage = {bytes: 300 * mib, files: 3};
        bridge.handle("settings:get", () => ({ok: true, value: settings}));
        bridge.handle("settings:update", (patch) => {
            settings = {...settings, ...patch};
            if (settings.stateDiskBudgetMib === 0) usage = {bytes: 0, files: 0};
            return {ok: true, value: settings};
        });
        bridge.handle("states:usage", () => ({ok: true, value: usage}));
        bridge.handle("states:clear", () => {
            usage = {bytes: 0, files: 0};
            return {ok: true, value: usage};
        });
        return {bridge, states: createSavedStates(bridge.api)};
    }

    test("shows the budget and what the states take; a budget typed is validated before it is stored", async () => {
        const {bridge, states} = setup();
        await states.load();
        expect(states.state.budgetMib).toBe(4096);
        expect(states.state.usage).toEqual({bytes: 300 * mib, files: 3});

        expect(await states.setBudget("a lot")).toBe(false);
        expect(states.state.budgetError).toMatch(/GiB or MiB/);
        expect(bridge.calls.filter((call) => call.channel === "settings:update")).toHaveLength(0);

        expect(await states.setBudget("0")).toBe(true);
        expect(bridge.calls.at(-2)).toEqual({channel: "settings:update", payload: {stateDiskBudgetMib: 0}});
        expect(states.state.budgetMib).toBe(0);
        expect(states.state.budgetError).toBeNull();
        // The store trimmed at once: the usage is read again.
        expect(states.state.usage).toEqual({bytes: 0, files: 0});
    });

    test("deletes the saved states, or says why it could not", async () => {
        const {bridge, states} = setup();
        await states.load();
        await states.clear();
        expect(states.state.usage).toEqual({bytes: 0, files: 0});
        bridge.fail("states:clear", "STORAGE", "read-only disk");
        await states.clear();
        expect(states.state.error).toBe("Could not delete the saved states: read-only disk");
    });
});

describe("the memory panel's saved state", () => {
    test("the conversation's last saved state, against a Full cache of the same tokens, and a resume from disk", () => {
        const bridge = createFakeBridge();
        const chat = createChat(bridge.api, {now: () => 0});
        const memory = createMemory(bridge.api, chat);
        const savedState = {bytes: 3 * mib, tokens: 4096, liveCells: 1024, liveBytes: 2 * mib, fullBytes: 8 * mib};
        chat.open("c1", [
            message({id: "u1", role: "user", text: "Q"}),
            message({id: "a1", role: "assistant", stats: {policy: "lethe", budgetCells: 1024, samples: [kvSample()], savedState}}),
            message({id: "u2", role: "user", text: "Q2"}),
            message({id: "a2", role: "assistant", stats: {policy: "lethe", budgetCells: 1024, samples: [kvSample()], resumedTokens: 4096}})
        ]);
        expect(memory.savedState).toEqual({messageId: "a1", ...savedState});
        expect(memory.resumedTokens).toBe(4096);
        expect(describeSavedState(savedState)).toEqual({
            disk: "3.00 MiB on disk · 4,096 tokens, 1,024 cells kept",
            full: "A Full cache of the same tokens: 8.00 MiB (the file is 63% smaller)"
        });
        expect(describeResumed(4096)).toBe("Resumed from disk (4,096 tokens)");

        chat.open("c2", [
            message({id: "u9", role: "user", text: "Q"}),
            message({id: "a9", role: "assistant", stats: {policy: "full", budgetCells: 1, samples: []}})
        ]);
        expect(memory.savedState).toBeNull();
        expect(memory.resumedTokens).toBeNull();
        memory.dispose();
    });

    test("a Full KV answer's state held by the engine says so, until the answer comes back with its figures", () => {
        const bridge = createFakeBridge();
        const chat = createChat(bridge.api, {now: () => 0});
        const memory = createMemory(bridge.api, chat);
        const stats = {policy: "full" as const, budgetCells: 4096, samples: [kvSample()]};
        chat.open("c1", [
            message({id: "u1", role: "user", text: "Q"}),
            message({id: "a1", role: "assistant", stats: {...stats, statePending: true}})
        ]);
        expect(memory.statePending).toBe(true);
        expect(memory.savedState).toBeNull();

        // Written when the conversation was left: the answer as stored, with the state's figures and without the mark.
        const savedState = {bytes: 8 * mib, tokens: 1000, liveCells: 1000, liveBytes: 8 * mib, fullBytes: 8 * mib};
        bridge.emit("chat:done", {conversationId: "c1", message: message({id: "a1", role: "assistant", stats: {...stats, savedState}})});
        expect(memory.statePending).toBe(false);
        expect(memory.savedState).toEqual({messageId: "a1", ...savedState});
        memory.dispose();
    });
});
