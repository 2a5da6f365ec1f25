import type {ConversationDetail, ConversationSettings, ConversationSummary, PonderApi} from "../../preload/contract.js";
import {describeError} from "../lib/describeError.js";
import {request} from "./request.js";
import {succeeded} from "./succeeded.js";

export type Conversations = ReturnType<typeof createConversations>;

/** Conversations whose title contains `query` (case-insensitive), in the list's order. */
function filterByTitle(items: ConversationSummary[], query: string): ConversationSummary[] {
    const needle = query.trim().toLocaleLowerCase();
    return needle === "" ? items : items.filter((item) => item.title.toLocaleLowerCase().includes(needle));
}

function newestFirst(a: ConversationSummary, b: ConversationSummary): number {
    return b.updatedAt - a.updatedAt;
}

/** The conversation list: search, create, rename, delete, select (loading the detail). */
export function createConversations(bridge: PonderApi) {
    const state = $state({
        items: [] as ConversationSummary[],
        /** Search box text; filters by title. */
        query: "",
        selectedId: null as string | null,
        /** The selected conversation's settings once loaded (its messages are owned by the chat state). */
        settings: null as ConversationSettings | null,
        loaded: false,
        error: null as string | null
    });
    const visible = $derived(filterByTitle(state.items, state.query));
    const selected = $derived(state.items.find((item) => item.id === state.selectedId) ?? null);

    function upsert(summary: ConversationSummary): void {
        const index = state.items.findIndex((item) => item.id === summary.id);
        if (index >= 0) state.items[index] = summary;
        else state.items.push(summary);
        state.items.sort(newestFirst);
    }

    async function refresh(): Promise<void> {
        const result = await request(bridge, "conversations:list", {});
        if (!succeeded(result, state, "Could not list the conversations")) return;
        state.items = [...result.value].sort(newestFirst);
        state.loaded = true;
    }

    async function create(title?: string): Promise<ConversationSummary | null> {
        const queryBefore = state.query;
        const result = await request(bridge, "conversations:create", title == null ? {} : {title});
        if (!succeeded(result, state, "Could not create a conversation")) return null;
        // Clear the search so the new conversation shows, unless the person typed a new one while it was created.
        if (state.query === queryBefore) state.query = "";
        upsert(result.value);
        return result.value;
    }

    async function rename(id: string, title: string): Promise<boolean> {
        const trimmed = title.trim();
        const current = state.items.find((item) => item.id === id);
        if (trimmed === "" || trimmed === current?.title) return false;
        const result = await request(bridge, "conversations:rename", {id, title: trimmed});
        if (!succeeded(result, state, "Could not rename the conversation")) return false;
        upsert(result.value);
        return true;
    }

    async function remove(id: string): Promise<boolean> {
        const result = await request(bridge, "conversations:delete", {id});
        if (!succeeded(result, state, "Could not delete the conversation")) return false;
        state.items = state.items.filter((item) => item.id !== id);
        if (state.selectedId === id) {
            state.selectedId = null;
            state.settings = null;
        }
        return true;
    }

    /** Selects a conversation and loads its detail; `null` when it failed or another selection overtook this one. */
    async function select(id: string): Promise<ConversationDetail | null> {
        // Another conversation's settings must not show as this one's while its own load.
        if (state.selectedId !== id) state.settings = null;
        state.selectedId = id;
        const result = await request(bridge, "conversations:get", {id});
        if (state.selectedId !== id) return null;
        if (!result.ok) {
            state.error = describeError("Could not open the conversation", result.error);
            state.settings = null;
            return null;
        }
        state.error = null;
        state.settings = result.value.settings;
        upsert(result.value.conversation);
        return result.value;
    }

    /** The conversation as a file (Markdown or JSON, with its memory statistics); `null` when it failed. */
    async function exportAs(
        id: string,
        format: "markdown" | "json"
    ): Promise<{fileName: string; mimeType: string; content: string} | null> {
        const result = await request(bridge, "conversations:export", {id, format});
        if (!result.ok) {
            state.error = describeError("Could not export the conversation", result.error);
            return null;
        }
        return result.value;
    }

    function deselect(): void {
        state.selectedId = null;
        state.settings = null;
    }

    return {
        state,
        /** The conversations matching the search, newest first. */
        get visible() {
            return visible;
        },
        get selected() {
            return selected;
        },
        refresh,
        create,
        rename,
        remove,
        select,
        deselect,
        upsert,
        exportAs
    };
}
