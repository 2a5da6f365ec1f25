import {describe, expect, test} from "vitest";
import type {ConversationSummary} from "../../../preload/contract.js";
import {createConversations} from "../../../renderer/state/conversations.svelte.js";
import {createFakeBridge, message, conversationSettings} from "./fakeBridge.js";

const summary = (id: string, title: string, updatedAt: number): ConversationSummary => ({
    id,
    title,
    createdAt: 0,
    updatedAt,
    messageCount: 0,
    policy: "full"
});

async function setup() {
    const bridge = createFakeBridge();
    bridge.reply("conversations:list", [
        summary("a", "Prime numbers", 1),
        summary("b", "Sky colour", 3),
        summary("c", "Prime factorisation", 2)
    ]);
    const conversations = createConversations(bridge.api);
    await conversations.refresh();
    return {bridge, conversations};
}

describe("conversations state", () => {
    test("lists newest first", async () => {
        const {conversations} = await setup();
        expect(conversations.visible.map((c) => c.id)).toEqual(["b", "c", "a"]);
    });

    test("search filters by title, ignoring case and surrounding spaces", async () => {
        const {conversations} = await setup();
        conversations.state.query = "  PRIME ";
        expect(conversations.visible.map((c) => c.title)).toEqual(["Prime factorisation", "Prime numbers"]);
        conversations.state.query = "nothing like it";
        expect(conversations.visible).toEqual([]);
        conversations.state.query = "";
        expect(conversations.visible).toHaveLength(3);
    });

    test("create puts the new conversation first and clears the search", async () => {
        const {bridge, conversations} = await setup();
        bridge.reply("conversations:create", summary("d", "New conversation", 9));
        conversations.state.query = "prime";
        const created = await conversations.create();
        expect(created?.id).toBe("d");
        expect(conversations.state.query).toBe("");
        expect(conversations.visible[0]?.id).toBe("d");
    });

    test("create keeps a search typed while the conversation was being created", async () => {
        const {bridge, conversations} = await setup();
        let answer!: () => void;
        bridge.handle(
            "conversations:create",
            () =>
                new Promise((resolve) => {
                    answer = () => resolve({ok: true, value: summary("d", "New conversation", 9)});
                })
        );
        const creating = conversations.create();
        conversations.state.query = "colour";
        answer();
        await creating;
        expect(conversations.state.query).toBe("colour");
    });

    test("rename trims the title and updates the row; an unchanged or empty title is not sent", async () => {
        const {bridge, conversations} = await setup();
        bridge.handle("conversations:rename", ({id, title}) => ({ok: true, value: summary(id, title, 5)}));
        expect(await conversations.rename("a", "  Primes  ")).toBe(true);
        expect(bridge.calls.at(-1)?.payload).toEqual({id: "a", title: "Primes"});
        expect(conversations.state.items.find((c) => c.id === "a")?.title).toBe("Primes");
        const sent = bridge.calls.length;
        expect(await conversations.rename("a", "   ")).toBe(false);
        expect(await conversations.rename("a", "Primes")).toBe(false);
        expect(bridge.calls).toHaveLength(sent);
    });

    test("select loads the detail; delete of the selected one clears the selection", async () => {
        const {bridge, conversations} = await setup();
        bridge.handle("conversations:get", ({id}) => ({
            ok: true,
            value: {
                conversation: summary(id, "Sky colour", 3),
                settings: conversationSettings(),
                messages: [message({id: "m1", role: "user", conversationId: id})]
            }
        }));
        const detail = await conversations.select("b");
        expect(detail?.messages).toHaveLength(1);
        expect(conversations.state.selectedId).toBe("b");
        expect(conversations.selected?.title).toBe("Sky colour");
        expect(conversations.state.settings?.temperature).toBe(0.6);

        bridge.reply("conversations:delete", undefined);
        expect(await conversations.remove("b")).toBe(true);
        expect(conversations.state.selectedId).toBeNull();
        expect(conversations.state.items.map((c) => c.id)).toEqual(["c", "a"]);
    });

    test("a slow selection overtaken by a newer one is dropped", async () => {
        const {bridge, conversations} = await setup();
        let release: () => void = () => {};
        bridge.handle(
            "conversations:get",
            ({id}) =>
                new Promise((resolve) => {
                    const value = {conversation: summary(id, id, 1), settings: conversationSettings(), messages: []};
                    if (id === "a") release = () => resolve({ok: true, value});
                    else resolve({ok: true, value});
                })
        );
        const first = conversations.select("a");
        await conversations.select("c");
        release();
        expect(await first).toBeNull();
        expect(conversations.state.selectedId).toBe("c");
    });

    test("errors surface as readable messages", async () => {
        const {bridge, conversations} = await setup();
        bridge.fail("conversations:delete", "NOT_FOUND", "Conversation a does not exist");
        expect(await conversations.remove("a")).toBe(false);
        expect(conversations.state.error).toBe("Could not delete the conversation: Conversation a does not exist");
        expect(conversations.state.items).toHaveLength(3);

        bridge.fail("conversations:list", "STORAGE", "");
        await conversations.refresh();
        expect(conversations.state.error).toBe("Could not list the conversations: The database could not be read or written");
    });
});
