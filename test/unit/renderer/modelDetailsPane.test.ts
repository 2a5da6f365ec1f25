// @vitest-environment jsdom
// The model's details as a person meets them: the main area shows them in place of the chat, with every control of the
// model, a side panel still beside them; the back button or Escape returns to the chat.
import {flushSync, mount, tick, unmount} from "svelte";
import {afterEach, beforeEach, describe, expect, test, vi} from "vitest";
import type {EngineStatus, ModelDetails, ModelInfo} from "../../../preload/contract.js";
import App from "../../../renderer/App.svelte";
import {createPonder, type Ponder} from "../../../renderer/state/ponder.svelte.js";
import {createFakeBridge} from "./fakeBridge.js";

const model: ModelInfo = {
    id: "m1",
    path: "/models/qwen3-1.7b.gguf",
    name: "Qwen3 1.7B",
    sizeBytes: 1_100_000_000,
    architecture: "qwen3",
    contextLength: 40_960,
    addedAt: 0,
    lastUsedAt: null,
    crashedAt: null
};
const engine: EngineStatus = {
    state: "ready",
    model,
    progress: null,
    message: null,
    build: {kind: "local", gpu: false, patched: true, llamaCppRelease: "b6000", seriesHash: "abc"}
};
const details = {
    ...model,
    layers: 28,
    headCount: 16,
    headCountKv: 8,
    embeddingLength: 2048,
    keyLength: 128,
    kvBytesPerToken: 114_688,
    weightsBytes: 1_000_000_000,
    parameterCount: 1_700_000_000,
    quantization: "Q8_0",
    compressionSupported: true,
    compressionNote: null,
    fit: null,
    retention: {available: false, reason: "No gate file beside the model."}
} as ModelDetails;

let target: HTMLElement;
let component: ReturnType<typeof mount> | null = null;
let ponder: Ponder | null = null;

beforeEach(() => {
    // jsdom has no media queries: the app asks one for the system's theme.
    vi.stubGlobal("matchMedia", () => ({matches: false, addEventListener() {}, removeEventListener() {}}));
    target = document.body.appendChild(document.createElement("div"));
});
afterEach(async () => {
    if (component != null) await unmount(component);
    component = null;
    ponder?.dispose();
    ponder = null;
    target.remove();
    vi.unstubAllGlobals();
});

async function setup() {
    const bridge = createFakeBridge();
    bridge.reply("models:list", [model]);
    bridge.reply("app:status", {version: "0.1.0", engine});
    bridge.reply("models:details", details);
    ponder = createPonder(bridge.api);
    component = mount(App, {target, props: {ponder}});
    await vi.waitFor(() => expect(target.querySelector("[data-testid=model-details-button]")).not.toBeNull());
    const byId = (id: string) => target.querySelector<HTMLElement>(`[data-testid=${id}]`);
    return {byId};
}

async function openDetails(byId: (id: string) => HTMLElement | null): Promise<HTMLElement> {
    byId("model-details-button")!.click();
    flushSync();
    await vi.waitFor(() => expect(byId("model-details")?.textContent).toMatch(/Quantization\s*Q8_0/));
    return byId("model-details")!;
}

describe("the model's details pane", () => {
    test("opens in the main area, not the sidebar, with the model's controls", async () => {
        const {byId} = await setup();
        const pane = await openDetails(byId);
        expect(pane.closest("main")).not.toBeNull();
        expect(pane.closest("[data-testid=model-picker]")).toBeNull();
        expect(pane.getAttribute("aria-labelledby")).not.toBeNull();
        expect(pane.textContent).toMatch(/Details of Qwen3 1\.7B/);
        for (const id of ["model-gpu-layers", "model-gpu-layers-note", "model-retention", "model-trimkv-button", "model-calibration"])
            expect(pane.querySelector(`[data-testid=${id}]`), id).not.toBeNull();
        expect(pane.querySelector<HTMLButtonElement>("[data-testid=model-remove-button]")?.disabled).toBe(true);
        expect(byId("model-details-button")!.getAttribute("aria-expanded")).toBe("true");
    });

    test("the back button returns to the chat", async () => {
        const {byId} = await setup();
        await openDetails(byId);
        byId("model-details-close")!.click();
        flushSync();
        expect(byId("model-details")).toBeNull();
        expect(byId("model-details-button")!.getAttribute("aria-expanded")).toBe("false");
        // focus goes back to the button that opened them
        await tick();
        expect(document.activeElement).toBe(byId("model-details-button"));
    });

    test("Escape returns to the chat, from the pane or from anywhere on the page", async () => {
        const {byId} = await setup();
        const pane = await openDetails(byId);
        pane.dispatchEvent(new KeyboardEvent("keydown", {key: "Escape", bubbles: true}));
        flushSync();
        expect(byId("model-details")).toBeNull();

        await openDetails(byId);
        document.body.dispatchEvent(new KeyboardEvent("keydown", {key: "Escape", bubbles: true}));
        flushSync();
        expect(byId("model-details")).toBeNull();
        await tick();
        expect(document.activeElement).toBe(byId("model-details-button"));
    });

    test("a side panel opens beside the details, and Escape closes it first, then the details", async () => {
        const {byId} = await setup();
        await openDetails(byId);
        ponder!.ui.serverOpen = true;
        flushSync();
        expect(byId("server-panel")).not.toBeNull();
        expect(byId("model-details")).not.toBeNull();
        document.body.dispatchEvent(new KeyboardEvent("keydown", {key: "Escape", bubbles: true}));
        flushSync();
        expect(byId("server-panel")).toBeNull();
        expect(byId("model-details")).not.toBeNull();
        document.body.dispatchEvent(new KeyboardEvent("keydown", {key: "Escape", bubbles: true}));
        flushSync();
        expect(byId("model-details")).toBeNull();
    });
});
