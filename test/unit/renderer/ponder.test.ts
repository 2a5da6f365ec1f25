import {describe, expect, test} from "vitest";
import type {ConversationSummary} from "../../../preload/contract.js";
import {createPonder} from "../../../renderer/state/ponder.svelte.js";
import {createFakeBridge, message, conversationSettings} from "./fakeBridge.js";

const summary = (id: string, title: string): ConversationSummary => ({
    id,
    title,
    createdAt: 0,
    updatedAt: 0,
    messageCount: 0,
    policy: "full"
});

function setup() {
    const bridge = createFakeBridge();
    const conversations = [summary("c0", "Old")];
    bridge.handle("conversations:list", () => ({ok: true, value: [...conversations]}));
    bridge.handle("conversations:create", () => {
        conversations.push(summary("c1", "New conversation"));
        return {ok: true, value: summary("c1", "New conversation")};
    });
    bridge.handle("conversations:get", ({id}) => ({
        ok: true,
        value: {
            conversation: summary(id, "Old"),
            settings: conversationSettings(),
            messages: [message({id: "m0", role: "user", conversationId: id})]
        }
    }));
    bridge.handle("chat:send", ({conversationId, text}) => ({
        ok: true,
        value: {
            userMessage: message({id: "u1", role: "user", conversationId, text}),
            assistantMessage: message({id: "a1", role: "assistant", conversationId, status: "streaming"})
        }
    }));
    return {bridge, ponder: createPonder(bridge.api)};
}

describe("ponder (the composed state)", () => {
    test("the demo model's sample problem is sent as a question, and its known answer kept for that conversation", async () => {
        const {bridge, ponder} = setup();
        bridge.reply("demo:sample", {
            task: "demo",
            question: "a=1\nZZ=a+a\nZZ?",
            answer: "2",
            answerMeaning: "the value of ZZ",
            size: "1 steps",
            seed: 2 ** 31,
            about: "A tiny model"
        });
        bridge.reply("models:list", []);
        bridge.reply("app:status", {version: "t", engine: {state: "ready", build: null, model: null, progress: null, message: null}});
        bridge.reply("settings:get", {} as never);
        bridge.reply("models:downloads", []);
        bridge.reply("server:get", {} as never);
        await ponder.start();
        expect(ponder.demo.sample?.answer).toBe("2");
        expect(await ponder.trySample()).toBe(true);
        expect(bridge.calls.find((call) => call.channel === "chat:send")?.payload).toMatchObject({text: "a=1\nZZ=a+a\nZZ?"});
        expect(ponder.demo.known[ponder.chat.state.conversationId!]).toEqual({answer: "2", meaning: "the value of ZZ"});
    });

    test("without the demo model there is no sample to try", async () => {
        const {bridge, ponder} = setup();
        bridge.reply("demo:sample", null);
        expect(await ponder.trySample()).toBe(false);
        expect(bridge.calls.some((call) => call.channel === "chat:send")).toBe(false);
    });

    test("Escape's target: the open side panel, whichever it is, then the model details", () => {
        const {ponder} = setup();
        expect(ponder.closeOpenPanel()).toBeNull();
        for (const panel of ["memory", "generation", "server", "engine"] as const) {
            ponder.ui[`${panel}Open`] = true;
            expect(ponder.closeOpenPanel()).toBe(panel);
            expect(ponder.ui[`${panel}Open`]).toBe(false);
        }
        ponder.models.state.detailsId = "m1";
        expect(ponder.closeOpenPanel()).toBe("modelDetails");
        expect(ponder.models.state.detailsId).toBeNull();
        expect(ponder.closeOpenPanel()).toBeNull();
    });

    test("forking opens the new conversation; a refusal says why", async () => {
        const {bridge, ponder} = setup();
        await ponder.openConversation("c0");
        bridge.reply("conversations:fork", summary("c9", "Old (fork)"));
        expect(await ponder.forkAt("m0")).toBe(true);
        expect(bridge.calls.find((call) => call.channel === "conversations:fork")?.payload).toEqual({id: "c0", messageId: "m0"});
        expect(ponder.chat.state.conversationId).toBe("c9");
        expect(ponder.conversations.state.items.map((item) => item.id)).toContain("c9");
        bridge.fail("conversations:fork", "BUSY", "Wait for the answer to finish before forking at it");
        expect(await ponder.forkAt("m0")).toBe(false);
        expect(ponder.chat.state.error).toMatch(/Could not fork the conversation: Wait for the answer/);
    });

    test("importing a conversation file opens it; a file that is not one says why", async () => {
        const {bridge, ponder} = setup();
        bridge.reply("conversations:import", summary("c7", "Imported"));
        expect(await ponder.importConversation('{"format": "ponder-conversation"}')).toBe(true);
        expect(bridge.calls.find((call) => call.channel === "conversations:import")?.payload).toEqual({
            content: '{"format": "ponder-conversation"}'
        });
        expect(ponder.chat.state.conversationId).toBe("c7");
        expect(ponder.conversations.state.items.map((item) => item.id)).toContain("c7");
        bridge.fail("conversations:import", "BAD_REQUEST", "The file is not JSON: Unexpected token");
        expect(await ponder.importConversation("nope")).toBe(false);
        expect(ponder.conversations.state.error).toMatch(/Could not import the conversation: The file is not JSON/);
        expect(ponder.chat.state.conversationId).toBe("c7");
    });

    test("a search result opens its conversation and asks for its message to be shown, again on a second click", async () => {
        const {ponder} = setup();
        const hit = {
            conversationId: "c0",
            conversationTitle: "Old",
            messageId: "m0",
            role: "user" as const,
            field: "text" as const,
            snippet: "x",
            terms: ["x"]
        };
        await ponder.openSearchHit(hit);
        expect(ponder.chat.state.conversationId).toBe("c0");
        expect(ponder.ui.focus).toMatchObject({messageId: "m0", field: "text", terms: ["x"], nonce: 1});
        await ponder.openSearchHit(hit);
        expect(ponder.ui.focus?.nonce).toBe(2);
    });

    test("a new conversation moves focus to the composer, unless the search was asked for while it was created", async () => {
        const {bridge, ponder} = setup();
        await ponder.newConversation();
        expect(ponder.ui.composerFocus).toBe(1);

        // Ctrl+N, then Ctrl+K before the conversation exists: the search keeps the focus.
        let finish: () => void = () => {};
        const created = new Promise<void>((resolve) => (finish = resolve));
        bridge.handle("conversations:create", async () => {
            await created;
            return {ok: true, value: summary("c2", "New conversation")};
        });
        const creating = ponder.newConversation();
        ponder.focusSearch();
        expect(ponder.ui.searchFocus).toBe(1);
        finish();
        expect(await creating).toBe(true);
        expect(ponder.chat.state.conversationId).toBe("c2");
        expect(ponder.ui.composerFocus).toBe(1);
        expect(ponder.ui.searchFocus).toBe(1);

        // Ctrl+K, then Ctrl+N: the newer request, the composer, wins.
        ponder.focusSearch();
        await ponder.newConversation();
        expect(ponder.ui.composerFocus).toBe(2);
    });

    test("sending with no conversation open creates one first", async () => {
        const {bridge, ponder} = setup();
        expect(await ponder.send("Hello")).toBe(true);
        expect(bridge.calls.map((call) => call.channel)).toContain("conversations:create");
        expect(ponder.chat.state.conversationId).toBe("c1");
        expect(ponder.conversations.state.selectedId).toBe("c1");
        expect(ponder.chat.state.messages.map((m) => m.text)).toEqual(["Hello", ""]);
    });

    test("opening a conversation loads its messages into the chat", async () => {
        const {ponder} = setup();
        await ponder.start();
        await ponder.openConversation("c0");
        expect(ponder.chat.state.conversationId).toBe("c0");
        expect(ponder.chat.state.messages.map((m) => m.id)).toEqual(["m0"]);
    });

    test("deleting the open conversation closes it", async () => {
        const {bridge, ponder} = setup();
        await ponder.openConversation("c0");
        bridge.reply("conversations:delete", undefined);
        expect(await ponder.deleteConversation("c0")).toBe(true);
        expect(ponder.chat.state.conversationId).toBeNull();
        expect(ponder.chat.state.messages).toEqual([]);
    });

    test("a finished answer refreshes the conversation list (titles and order change)", async () => {
        const {bridge, ponder} = setup();
        await ponder.send("Hello");
        const lists = () => bridge.calls.filter((call) => call.channel === "conversations:list").length;
        const before = lists();
        bridge.emit("chat:done", {conversationId: "c1", message: message({id: "a1", role: "assistant", conversationId: "c1", text: "Hi"})});
        expect(lists()).toBe(before + 1);
        expect(ponder.chat.state.messages.at(-1)?.text).toBe("Hi");
    });
});
