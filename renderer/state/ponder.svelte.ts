import type {DemoSample, PonderApi, SearchHit} from "../../preload/contract.js";
import type {SocketBridge} from "../lib/createSocketBridge.js";
import {createBudget, type BudgetOptions} from "./budget.svelte.js";
import {createChat, type ChatOptions} from "./chat.svelte.js";
import {createConversations} from "./conversations.svelte.js";
import {createDownloads} from "./downloads.svelte.js";
import {createDraftTokens, type DraftTokensOptions} from "./draftTokens.svelte.js";
import {createEngineBuilds} from "./engineBuilds.svelte.js";
import {createSavedStates} from "./savedStates.svelte.js";
import {createRpcServers} from "./rpcServers.svelte.js";
import {createGeneration} from "./generation.svelte.js";
import {createMemory, type MemoryOptions} from "./memory.svelte.js";
import {createModels} from "./models.svelte.js";
import {conversationTokens} from "../lib/budgetForm.js";
import {describeError} from "../lib/describeError.js";
import {request} from "./request.js";
import {createSearch, type SearchOptions} from "./search.svelte.js";
import {createServer} from "./server.svelte.js";
import {createSettings} from "./settings.svelte.js";

export type Ponder = ReturnType<typeof createPonder>;
export type PonderOptions = ChatOptions & {
    memory?: MemoryOptions;
    budget?: BudgetOptions;
    search?: SearchOptions;
    draftTokens?: DraftTokensOptions;
};

/** A message to bring into view with the searched words highlighted; `nonce` makes the same hit jump again. */
export type MessageFocus = {messageId: string; field: SearchHit["field"]; terms: string[]; nonce: number};

/** All renderer state over one bridge, and the use cases that span several modules. */
export function createPonder(bridge: PonderApi | SocketBridge, options: PonderOptions = {}) {
    const conversations = createConversations(bridge);
    const chat = createChat(bridge, options);
    // A calibration that installed gates: the budget controller asks again which policies the model can run.
    const models = createModels(bridge, {onGatesInstalled: () => void budget.estimate()});
    const settings = createSettings(bridge);
    const memory = createMemory(bridge, chat, options.memory);
    const budget = createBudget(bridge, conversations, settings, {
        conversationTokens: () =>
            chat.state.conversationId === conversations.state.selectedId ? conversationTokens(chat.state.messages) : null,
        ...options.budget
    });
    const generation = createGeneration(bridge, conversations, settings);
    const downloads = createDownloads(bridge, models);
    const server = createServer(bridge);
    const engineBuilds = createEngineBuilds(bridge);
    const savedStates = createSavedStates(bridge);
    const rpcServers = createRpcServers(bridge);
    const search = createSearch(bridge, options.search);
    const draftTokens = createDraftTokens(bridge, options.draftTokens);
    const connection = $state({connected: true});
    const ui = $state({
        /** Bump to move focus to the composer. */
        composerFocus: 0,
        /** Bump to move focus to the search box (Ctrl/Cmd+K). */
        searchFocus: 0,
        /** The memory panel (gauge, budget controller, what the model remembers) is open. */
        memoryOpen: false,
        /** The generation panel (system prompt, temperature, max tokens) is open; at most one side panel is. */
        generationOpen: false,
        /** The Server panel (the local OpenAI-compatible API) is open. */
        serverOpen: false,
        /** The Engine panel (which llama.cpp build runs) is open. */
        engineOpen: false,
        /** The theme in effect, `system` resolved (App.svelte keeps it current): canvases read their colours by it. */
        theme: "light" as "light" | "dark",
        /** The message a search result opened, to scroll to and highlight. */
        focus: null as MessageFocus | null
    });

    /** Counts the requests to move focus: a late one (a new conversation's composer) yields to any made after it. */
    let focusRequests = 0;

    /** Moves focus to the search box (Ctrl/Cmd+K). */
    function focusSearch(): void {
        focusRequests++;
        ui.searchFocus++;
    }

    /**
     * What Escape closes when no field took it: the side panel that is open, else the model details. Returns which
     * one closed (`null` when none was open), so the caller can move focus back.
     */
    function closeOpenPanel(): "memory" | "generation" | "server" | "engine" | "modelDetails" | null {
        for (const panel of ["memory", "generation", "server", "engine"] as const) {
            const key = `${panel}Open` as const;
            if (ui[key]) {
                ui[key] = false;
                if (panel === "server") server.hideKey(); // a new key is shown once, while the panel is open
                return panel;
            }
        }
        if (models.state.detailsId != null) {
            models.closeDetails();
            return "modelDetails";
        }
        return null;
    }

    async function start(): Promise<void> {
        await Promise.all([
            conversations.refresh(),
            models.refresh(),
            models.readCalibration(),
            settings.load(),
            downloads.refresh(),
            server.load(),
            refreshDemoSample()
        ]);
    }

    async function openConversation(id: string): Promise<void> {
        if (id === chat.state.conversationId && id === conversations.state.selectedId) return;
        const detail = await conversations.select(id);
        if (detail) chat.open(id, detail.messages);
    }

    /** Opens a search result: its conversation, scrolled to the message with the words highlighted. */
    async function openSearchHit(hit: SearchHit): Promise<void> {
        await openConversation(hit.conversationId);
        if (chat.state.conversationId !== hit.conversationId) return;
        ui.focus = {messageId: hit.messageId, field: hit.field, terms: hit.terms, nonce: (ui.focus?.nonce ?? 0) + 1};
    }

    /** Starts a new conversation from a copy of the open one up to `messageId`, and opens it. */
    /** Adds a conversation from a JSON export and opens it. */
    async function importConversation(content: string): Promise<boolean> {
        const result = await request(bridge, "conversations:import", {content});
        if (!result.ok) {
            conversations.state.error = describeError("Could not import the conversation", result.error);
            return false;
        }
        conversations.state.error = null;
        conversations.upsert(result.value);
        await openConversation(result.value.id);
        return true;
    }

    async function forkAt(messageId: string): Promise<boolean> {
        const id = chat.state.conversationId;
        if (id == null) return false;
        const result = await request(bridge, "conversations:fork", {id, messageId});
        if (!result.ok) {
            chat.state.error = describeError("Could not fork the conversation", result.error);
            return false;
        }
        conversations.upsert(result.value);
        await openConversation(result.value.id);
        return true;
    }

    async function newConversation(): Promise<boolean> {
        const focusRequest = ++focusRequests;
        const created = await conversations.create();
        if (!created) return false;
        conversations.state.selectedId = created.id;
        conversations.state.settings = null;
        chat.open(created.id, []);
        // Focus goes to the composer unless the person asked for another place (Ctrl+K) while it was created.
        if (focusRequest === focusRequests) ui.composerFocus++;
        // Its settings (the defaults at creation) feed the budget controller.
        void conversations.select(created.id);
        return true;
    }

    async function deleteConversation(id: string): Promise<boolean> {
        const removed = await conversations.remove(id);
        if (removed && chat.state.conversationId === id) chat.open(null, []);
        return removed;
    }

    /** Sends from the composer, creating a conversation first when none is open. */
    async function send(text: string): Promise<boolean> {
        if (text.trim() === "" || chat.generating) return false;
        if (chat.state.conversationId == null && !(await newConversation())) return false;
        const sent = await chat.send(text);
        if (sent) void conversations.refresh();
        return sent;
    }

    /** Opens a link from an answer in the system browser. */
    async function openExternal(url: string): Promise<boolean> {
        return (await request(bridge, "shell:openExternal", {url})).ok;
    }

    /**
     * The sample problem of the loaded model's task (when it is a task model Ponder ships), and the known answers of
     * the samples sent, by conversation, shown after the model's own.
     */
    const demo = $state({sample: null as DemoSample | null, known: {} as Record<string, {answer: string; meaning: string}>});
    let demoModelId: string | null | undefined;

    async function refreshDemoSample(): Promise<void> {
        const result = await request(bridge, "demo:sample", undefined);
        demo.sample = result.ok ? result.value : null;
    }

    /** Sends the demo task's sample problem (in the open conversation, or a new one) and remembers its known answer. */
    async function trySample(): Promise<boolean> {
        const sample = demo.sample;
        if (sample == null || !(await send(sample.question))) return false;
        if (chat.state.conversationId != null)
            demo.known[chat.state.conversationId] = {answer: sample.answer, meaning: sample.answerMeaning};
        void refreshDemoSample();
        return true;
    }

    // Another model loaded (or none): ask again whether it is the demo model.
    const offModel = bridge.on("engine:status", (status) => {
        const id = status.state === "ready" ? (status.model?.id ?? null) : null;
        if (id !== demoModelId) {
            demoModelId = id;
            void refreshDemoSample();
        }
    });

    // Titles, counts and order change when an answer completes: a coarse change, so refetch the list.
    const offDone = bridge.on("chat:done", () => void conversations.refresh());
    // After a dropped connection, events were missed: reload everything once it is back.
    let dropped = false;
    const offConnection =
        "onConnection" in bridge
            ? bridge.onConnection((connected) => {
                  connection.connected = connected;
                  if (!connected) dropped = true;
                  else if (dropped) void resync();
              })
            : () => {};

    async function resync(): Promise<void> {
        await start();
        const id = chat.state.conversationId;
        if (id != null) {
            const detail = await conversations.select(id);
            if (detail) chat.open(id, detail.messages);
        }
    }

    return {
        conversations,
        chat,
        models,
        settings,
        memory,
        budget,
        generation,
        downloads,
        server,
        engineBuilds,
        savedStates,
        rpcServers,
        search,
        draftTokens,
        connection,
        ui,
        start,
        openConversation,
        openSearchHit,
        forkAt,
        importConversation,
        newConversation,
        deleteConversation,
        send,
        openExternal,
        focusSearch,
        closeOpenPanel,
        demo,
        trySample,
        dispose(): void {
            offDone();
            offModel();
            offConnection();
            chat.dispose();
            models.dispose();
            memory.dispose();
            budget.dispose();
            draftTokens.dispose();
            downloads.dispose();
            server.dispose();
        }
    };
}
