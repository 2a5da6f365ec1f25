// @vitest-environment jsdom
// The composer as a person sees it: a message longer than the conversation's KV budget is flagged under the input while
// it is typed (debounced, stale answers dropped), and with Full KV it cannot be sent.
import {flushSync, mount, unmount} from "svelte";
import {afterEach, beforeEach, describe, expect, test, vi} from "vitest";
import type {Result, TokenCount} from "../../../preload/contract.js";
import {createPonder, type Ponder} from "../../../renderer/state/ponder.svelte.js";
import ComposerHarness from "./ComposerHarness.svelte";
import {createFakeBridge, message} from "./fakeBridge.js";

const fullKvTooLong: TokenCount = {messageTokens: 1532, promptTokens: 1540, policy: "full", budgetCells: 1024};
const letheTooLong: TokenCount = {messageTokens: 1532, promptTokens: 1540, policy: "lethe", budgetCells: 1024};
const fits: TokenCount = {messageTokens: 12, promptTokens: 20, policy: "full", budgetCells: 1024};

let target: HTMLElement;
let component: ReturnType<typeof mount> | null = null;
let ponder: Ponder | null = null;

beforeEach(() => {
    vi.useFakeTimers();
    target = document.body.appendChild(document.createElement("div"));
});
afterEach(async () => {
    if (component != null) await unmount(component);
    component = null;
    ponder?.dispose();
    ponder = null;
    target.remove();
    vi.useRealTimers();
});

function setup(count: (text: string) => Result<TokenCount | null> | Promise<Result<TokenCount | null>>) {
    const bridge = createFakeBridge();
    bridge.handle("chat:countTokens", ({text}) => count(text));
    bridge.handle("chat:send", ({conversationId, text}) => ({
        ok: true,
        value: {
            userMessage: message({id: "u1", role: "user", conversationId, text}),
            assistantMessage: message({id: "a1", role: "assistant", conversationId, status: "streaming"})
        }
    }));
    ponder = createPonder(bridge.api);
    ponder.chat.open("c1", []);
    component = mount(ComposerHarness, {target, props: {app: ponder}});
    flushSync();
    const input = target.querySelector<HTMLTextAreaElement>("[data-testid=composer-input]")!;
    const hint = target.querySelector<HTMLElement>("[data-testid=composer-budget-hint]")!;
    const send = () => target.querySelector<HTMLButtonElement>("[data-testid=send-button]")!;
    const counts = () => bridge.calls.filter((call) => call.channel === "chat:countTokens").map((call) => call.payload);
    const sends = () => bridge.calls.filter((call) => call.channel === "chat:send");
    return {bridge, input, hint, send, counts, sends};
}

function type(input: HTMLTextAreaElement, text: string): void {
    input.value = text;
    input.dispatchEvent(new Event("input", {bubbles: true}));
    flushSync();
}

/** Lets the debounce run out and the count's answer arrive. */
async function settle(ms = 300): Promise<void> {
    await vi.advanceTimersByTimeAsync(ms);
    flushSync();
}

function pressEnter(input: HTMLTextAreaElement): void {
    input.dispatchEvent(new KeyboardEvent("keydown", {key: "Enter", bubbles: true, cancelable: true}));
    flushSync();
}

describe("the composer's KV budget hint", () => {
    test("Full KV: a message its budget cannot hold is flagged under the input, politely announced, and cannot be sent", async () => {
        const {input, hint, send, sends} = setup(() => ({ok: true, value: fullKvTooLong}));
        expect(hint.getAttribute("aria-live")).toBe("polite");
        expect(input.getAttribute("aria-describedby")).toBe(hint.id);
        type(input, "a very long question");
        await settle();
        expect(hint.textContent).toBe(
            "This message is 1,532 tokens and exceeds Full KV's budget of 1,024 cells (16 of them are kept for the " +
                "answer's first tokens): raise the KV budget or choose a pruning policy (Memory) to send it."
        );
        expect(hint.classList.contains("block")).toBe(true);
        expect(send().disabled).toBe(true);
        expect(input.getAttribute("aria-invalid")).toBe("true");
        pressEnter(input);
        await settle(0);
        expect(sends()).toHaveLength(0);
    });

    test("a pruning policy: the hint says the question is pruned while it is read, and the message can still be sent", async () => {
        const {input, hint, send, sends} = setup(() => ({ok: true, value: letheTooLong}));
        type(input, "a very long question");
        await settle();
        expect(hint.textContent).toBe(
            "This message is 1,532 tokens; the KV budget is 1,024 cells: Lethe will prune the question while reading it, " +
                "so parts of it can be lost."
        );
        expect(hint.classList.contains("prune")).toBe(true);
        expect(send().disabled).toBe(false);
        pressEnter(input);
        await settle(0);
        expect(sends()).toHaveLength(1);
    });

    test("counts once typing pauses (300 ms), with the latest text; an answer to an older request is dropped", async () => {
        let release: (() => void) | null = null;
        const {input, hint, send, counts} = setup((text) =>
            text.startsWith("long")
                ? new Promise((resolve) => (release = () => resolve({ok: true, value: fullKvTooLong})))
                : {ok: true, value: fits}
        );
        type(input, "l");
        await settle(100);
        type(input, "long question");
        await settle(299);
        expect(counts()).toHaveLength(0);
        await settle(1);
        expect(counts()).toEqual([{conversationId: "c1", text: "long question"}]);
        // The long question's count is still on its way when the text becomes short and is counted again.
        type(input, "short");
        await settle();
        expect(counts()).toHaveLength(2);
        release!();
        await settle(0);
        expect(hint.textContent).toBe("");
        expect(send().disabled).toBe(false);
    });

    test("a shorter text is not blocked by the count of the longer one while its own count is on its way", async () => {
        const {input, send} = setup((text) => ({ok: true, value: text.length > 10 ? fullKvTooLong : fits}));
        type(input, "a very long question");
        await settle();
        expect(send().disabled).toBe(true);
        type(input, "a very long question, longer");
        expect(send().disabled).toBe(true);
        type(input, "short");
        expect(send().disabled).toBe(false);
        await settle();
        expect(send().disabled).toBe(false);
    });

    test("no model loaded (a null count) or a refused count: no hint, and sending is left to the send", async () => {
        const {input, hint, send} = setup((text) =>
            text === "refused"
                ? {ok: false, error: {code: "BAD_REQUEST", message: "A text to count is at most 4 MiB"}}
                : {ok: true, value: null}
        );
        type(input, "hello");
        await settle();
        expect(hint.textContent).toBe("");
        expect(send().disabled).toBe(false);
        type(input, "refused");
        await settle();
        expect(hint.textContent).toBe("");
        expect(send().disabled).toBe(false);
    });
});
