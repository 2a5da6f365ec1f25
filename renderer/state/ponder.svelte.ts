import type {PonderApi} from "../../preload/contract.js";
import type {SocketBridge} from "../lib/createSocketBridge.js";
import {createChat, type ChatOptions} from "./chat.svelte.js";
import {createConversations} from "./conversations.svelte.js";
import {createModels} from "./models.svelte.js";
import {request} from "./request.js";
import {createSettings} from "./settings.svelte.js";

export type Ponder = ReturnType<typeof createPonder>;

/** All renderer state over one bridge, and the use cases that span several modules. */
export function createPonder(bridge: PonderApi | SocketBridge, options: ChatOptions = {}) {
    const conversations = createConversations(bridge);
    const chat = createChat(bridge, options);
    const models = createModels(bridge);
    const settings = createSettings(bridge);
    const connection = $state({connected: true});
    /** Requests from one component to another: bump `composerFocus` to move focus to the composer. */
    const ui = $state({composerFocus: 0});

    async function start(): Promise<void> {
        await Promise.all([conversations.refresh(), models.refresh(), settings.load()]);
    }

    async function openConversation(id: string): Promise<void> {
        if (id === chat.state.conversationId && id === conversations.state.selectedId)
            return;
        const detail = await conversations.select(id);
        if (detail)
            chat.open(id, detail.messages);
    }

    async function newConversation(): Promise<boolean> {
        const created = await conversations.create();
        if (!created)
            return false;
        conversations.state.selectedId = created.id;
        chat.open(created.id, []);
        ui.composerFocus++;
        return true;
    }

    async function deleteConversation(id: string): Promise<boolean> {
        const removed = await conversations.remove(id);
        if (removed && chat.state.conversationId === id)
            chat.open(null, []);
        return removed;
    }

    /** Sends from the composer, creating a conversation first when none is open. */
    async function send(text: string): Promise<boolean> {
        if (text.trim() === "" || chat.generating)
            return false;
        if (chat.state.conversationId == null && !await newConversation())
            return false;
        const sent = await chat.send(text);
        if (sent)
            void conversations.refresh();
        return sent;
    }

    /** Opens a link from an answer in the system browser. */
    async function openExternal(url: string): Promise<boolean> {
        return (await request(bridge, "shell:openExternal", {url})).ok;
    }

    // Titles, counts and order change when an answer completes: a coarse change, so refetch the list.
    const offDone = bridge.on("chat:done", () => void conversations.refresh());
    // After a dropped connection, events were missed: reload everything once it is back.
    let dropped = false;
    const offConnection = "onConnection" in bridge
        ? bridge.onConnection((connected) => {
            connection.connected = connected;
            if (!connected)
                dropped = true;
            else if (dropped)
                void resync();
        })
        : () => {};

    async function resync(): Promise<void> {
        await start();
        const id = chat.state.conversationId;
        if (id != null) {
            const detail = await conversations.select(id);
            if (detail)
                chat.open(id, detail.messages);
        }
    }

    return {
        conversations, chat, models, settings, connection, ui,
        start, openConversation, newConversation, deleteConversation, send, openExternal,
        dispose(): void {
            offDone();
            offConnection();
            chat.dispose();
            models.dispose();
        }
    };
}
