import {afterEach, beforeEach, describe, expect, test, vi} from "vitest";
import type {KvSample} from "../../../preload/contract.js";
import {createChat} from "../../../renderer/state/chat.svelte.js";
import {describeRead} from "../../../renderer/lib/describeRead.js";
import {createMemory, type MemoryOptions} from "../../../renderer/state/memory.svelte.js";
import {createFakeBridge, kvSample, message} from "./fakeBridge.js";

function setup(options: MemoryOptions = {}) {
    const bridge = createFakeBridge();
    const chat = createChat(bridge.api, {now: () => Date.now()});
    const memory = createMemory(bridge.api, chat, {throttleMs: 250, ...options});
    chat.open("c1", [message({id: "u1", role: "user", text: "Q"}), message({id: "a1", role: "assistant", status: "streaming"})]);
    const reading = (step: number, overrides: Partial<KvSample> = {}) =>
        bridge.emit("chat:memory", {
            conversationId: "c1",
            messageId: "a1",
            sample: kvSample({step, tokensSeen: 100 + step, ...overrides})
        });
    return {bridge, chat, memory, reading};
}

beforeEach(() => {
    vi.useFakeTimers();
});

afterEach(() => {
    vi.useRealTimers();
});

describe("memory state", () => {
    test("the first reading shows at once, later ones at most every 250 ms", async () => {
        const {memory, reading} = setup();
        expect(memory.current).toBeNull();
        reading(1);
        expect(memory.current).toMatchObject({messageId: "a1", live: true});
        expect(memory.current?.sample.step).toBe(1);
        const version = memory.version;
        for (let step = 2; step <= 40; step++) reading(step);
        // 39 events, no update yet: nothing re-renders per token.
        expect(memory.version).toBe(version);
        expect(memory.current?.sample.step).toBe(1);
        await vi.advanceTimersByTimeAsync(250);
        expect(memory.version).toBe(version + 1);
        expect(memory.current?.sample.step).toBe(40);
        expect(memory.remembered?.live).toBe(true);
    });

    test("readings of another conversation are ignored", () => {
        const {bridge, memory} = setup();
        bridge.emit("chat:memory", {conversationId: "c2", messageId: "a9", sample: kvSample()});
        expect(memory.current).toBeNull();
        expect(memory.remembered).toBeNull();
    });

    test("the chart stays bounded on a very long answer", async () => {
        const {memory, reading} = setup();
        for (let step = 1; step <= 20_000; step++) reading(step);
        await vi.advanceTimersByTimeAsync(250);
        expect(memory.points.length).toBeLessThanOrEqual(400);
    });

    test("the strip gathers what the live rounds recorded of each token; a finished answer shows its stored record and rounds", async () => {
        const {bridge, memory, reading} = setup();
        const scores = (positions: number[], round: number) => ({
            kind: "attention" as const,
            layers: 3,
            positions,
            scores: positions.map(() => round / 10),
            rounds: positions.map(() => round),
            keptBy: positions.map(() => "5")
        });
        reading(1, {tokens: scores([0, 1, 2], 1)});
        reading(2, {tokens: scores([0, 2, 3], 2)});
        await vi.advanceTimersByTimeAsync(250);
        // The later round's record wins where both saw a token; the earlier one's stays for a token only it saw.
        expect(memory.remembered?.scores).toEqual({
            kind: "attention",
            layers: 3,
            positions: [0, 1, 2, 3],
            scores: [0.2, 0.1, 0.2, 0.2],
            rounds: [2, 1, 2, 2],
            keptBy: ["5", "5", "5", "5"]
        });
        expect(memory.remembered?.rounds).toEqual([]);
        const rounds = [{first: 1, last: 1, step: 4, tokensSeen: 104, evicted: [5, 9]}];
        bridge.emit("chat:done", {
            conversationId: "c1",
            message: message({
                id: "a1",
                role: "assistant",
                status: "complete",
                stats: {policy: "lethe", budgetCells: 64, samples: [kvSample({step: 20, tokensSeen: 120})], tokens: scores([7], 3), rounds}
            })
        });
        expect(memory.remembered).toMatchObject({live: false, rounds, scores: scores([7], 3)});
    });

    test("at rest the gauge shows the last sample of the last answer's stats", async () => {
        const {bridge, chat, memory, reading} = setup();
        reading(1);
        const stored = [kvSample({step: 10, tokensSeen: 110}), kvSample({step: 20, tokensSeen: 120, liveBytes: 1234})];
        bridge.emit("chat:done", {
            conversationId: "c1",
            message: message({id: "a1", role: "assistant", status: "complete", stats: {policy: "lethe", budgetCells: 512, samples: stored}})
        });
        await vi.advanceTimersByTimeAsync(250);
        expect(memory.current).toMatchObject({messageId: "a1", live: false});
        expect(memory.current?.sample.liveBytes).toBe(1234);
        expect(memory.remembered).toMatchObject({live: false, policy: "lethe", scores: null, rounds: []});
        expect(memory.footprintOf(chat.state.messages[1]!)?.liveBytes).toBe(1234);
    });

    test("an answer finished without stored stats keeps its live reading", async () => {
        const {bridge, memory, reading} = setup();
        reading(1, {liveBytes: 777});
        bridge.emit("chat:done", {conversationId: "c1", message: message({id: "a1", role: "assistant", status: "complete"})});
        await vi.advanceTimersByTimeAsync(250);
        expect(memory.current).toMatchObject({live: false});
        expect(memory.current?.sample.liveBytes).toBe(777);
    });

    test("the conversation's chart joins every answer's samples in order", () => {
        const {bridge, chat, memory} = setup();
        const stats = (from: number) => ({
            policy: "h2o" as const,
            budgetCells: 512,
            samples: [kvSample({tokensSeen: from}), kvSample({tokensSeen: from + 50})]
        });
        chat.open("c1", [
            message({id: "u1", role: "user"}),
            message({id: "a1", role: "assistant", stats: stats(100)}),
            message({id: "u2", role: "user"}),
            message({id: "a2", role: "assistant", stats: stats(300)}),
            message({id: "u3", role: "user"}),
            message({id: "a3", role: "assistant", status: "streaming"})
        ]);
        bridge.emit("chat:memory", {conversationId: "c1", messageId: "a3", sample: kvSample({tokensSeen: 500})});
        expect(memory.points.map((point) => point.tokens)).toEqual([100, 150, 300, 350, 500]);
        expect(memory.footprintOf(chat.state.messages[1]!)?.tokensSeen).toBe(150);
        expect(memory.footprintOf(chat.state.messages[5]!)?.tokensSeen).toBe(500);
    });

    test("rebuild progress shows for the open conversation, with why it reads, and clears after completing", async () => {
        const {bridge, memory} = setup();
        bridge.emit("chat:rebuild", {conversationId: "c2", progress: 0.3, reason: "settings"});
        expect(memory.rebuild).toBeNull();
        bridge.emit("chat:rebuild", {conversationId: "c1", progress: 0.42, reason: "settings"});
        expect(memory.rebuild).toEqual({progress: 0.42, reason: "settings"});
        bridge.emit("chat:rebuild", {conversationId: "c1", progress: 1, reason: "settings"});
        expect(memory.rebuild).toEqual({progress: 1, reason: "settings"});
        await vi.advanceTimersByTimeAsync(1500);
        expect(memory.rebuild).toBeNull();
    });

    test("a new message's read says so, and leaves nothing behind once read", () => {
        const {bridge, memory} = setup();
        bridge.emit("chat:rebuild", {conversationId: "c1", progress: 0.5, reason: "message"});
        expect(memory.rebuild).toEqual({progress: 0.5, reason: "message"});
        expect(describeRead("message", 50)).toBe("Reading your message… 50%");
        bridge.emit("chat:rebuild", {conversationId: "c1", progress: 1, reason: "message"});
        expect(memory.rebuild).toBeNull();
        // Only a history read into a context made anew speaks of the settings.
        expect(describeRead("conversation", 40)).toBe("Reading the conversation into the context… 40%");
        expect(describeRead("settings", 40)).toMatch(/^Rebuilding the context for the new compression settings/);
        expect(describeRead("message", 40)).not.toMatch(/settings|rebuild/i);
    });

    test("dispose removes the listeners", () => {
        const {bridge, memory} = setup();
        memory.dispose();
        expect(bridge.listenerCount("chat:memory")).toBe(0);
        expect(bridge.listenerCount("chat:rebuild")).toBe(0);
    });
});
