// @vitest-environment jsdom
// The memory gauge before any answer says in words what will appear there, instead of empty figures; a reading replaces
// the words with its figures.
import {flushSync, mount, unmount, type Component} from "svelte";
import {afterEach, beforeEach, describe, expect, test} from "vitest";
import type {KvSample} from "../../../preload/contract.js";
import MemoryGauge from "../../../renderer/components/MemoryGauge.svelte";
import type {MemoryReading} from "../../../renderer/state/memory.svelte.js";
import {createPonder, type Ponder} from "../../../renderer/state/ponder.svelte.js";
import {createFakeBridge} from "./fakeBridge.js";
import PonderHarness from "./PonderHarness.svelte";

const mib = 1024 * 1024;
const sample: KvSample = {
    step: 100,
    tokensSeen: 1200,
    cellsLive: 300,
    cellsAllocated: 512,
    bytesPerCell: 100 * 1024,
    liveBytes: 30 * mib,
    allocatedBytes: 50 * mib,
    fullBytes: 120 * mib,
    pruneRounds: 3,
    tokensEvicted: 900,
    forcedDrops: 0,
    tokensPerSecond: 24,
    sparsityPerLayer: [],
    scoringMs: 0
};

let target: HTMLElement;
let component: ReturnType<typeof mount> | null = null;
let ponder: Ponder | null = null;

beforeEach(() => {
    target = document.body.appendChild(document.createElement("div"));
    ponder = createPonder(createFakeBridge().api);
});
afterEach(async () => {
    if (component != null) await unmount(component);
    component = null;
    ponder?.dispose();
    ponder = null;
    target.remove();
});

function show(props: {reading?: MemoryReading | null; empty?: string}): HTMLElement {
    const gauge = MemoryGauge as unknown as Component<Record<string, unknown>>;
    component = mount(PonderHarness, {target, props: {app: ponder!, component: gauge, props}});
    flushSync();
    return target.querySelector<HTMLElement>("[data-testid=memory-gauge]")!;
}

describe("the memory gauge", () => {
    test("before any answer, it says what will appear there, and shows no dashes", () => {
        const gauge = show({});
        expect(gauge.querySelector("[data-testid=gauge-empty]")?.textContent).toMatch(
            /The KV cache's size and what compression saved appear here once a model answers/
        );
        expect(gauge.textContent).not.toMatch(/–/);
        expect(gauge.querySelector("[data-testid=gauge-savings]")).toBeNull();
    });

    test("a gauge placed elsewhere says its own words", () => {
        const gauge = show({reading: null, empty: "Appears once the server answers a request."});
        expect(gauge.querySelector("[data-testid=gauge-empty]")?.textContent).toBe("Appears once the server answers a request.");
    });

    test("a reading replaces the words with its figures", () => {
        const gauge = show({reading: {messageId: "a1", sample, live: false}});
        expect(gauge.querySelector("[data-testid=gauge-empty]")).toBeNull();
        expect(gauge.querySelector("[data-testid=gauge-savings]")?.textContent).toBe("75%");
        expect(gauge.querySelector("[data-testid=gauge-live]")?.textContent).toMatch(/^30(\.0+)? MiB$/);
        expect(gauge.querySelector("[data-testid=gauge-tokens]")?.textContent).toMatch(/1,200 seen · 300 kept/);
    });
});
