import type {PonderApi, SearchHit} from "../../preload/contract.js";
import {request} from "./request.js";
import {succeeded} from "./succeeded.js";

export type Search = ReturnType<typeof createSearch>;

export type SearchOptions = {
    /** Milliseconds to wait after the last keystroke before searching. Defaults to `150`. */
    debounceMs?: number;
};

/** A snippet cut into plain and matched parts (the backend marks matches with U+0002 ... U+0003). */
export function snippetParts(snippet: string): Array<{text: string; match: boolean}> {
    const parts: Array<{text: string; match: boolean}> = [];
    // eslint-disable-next-line no-control-regex -- U+0002 and U+0003 are the backend's match markers
    for (const [index, piece] of snippet.split(/[\u0002\u0003]/).entries())
        if (piece !== "") parts.push({text: piece, match: index % 2 === 1});
    return parts;
}

/** Full-text search over every conversation's messages, as the search box is typed in. */
export function createSearch(bridge: PonderApi, options: SearchOptions = {}) {
    const state = $state({
        query: "",
        hits: [] as SearchHit[],
        searching: false,
        error: null as string | null
    });
    let timer: ReturnType<typeof setTimeout> | null = null;
    let pending: (() => void) | null = null;
    let latest = 0;

    /** Searches for `query` after a short pause; an empty query clears the results at once. Resolves when done or superseded. */
    function run(query: string): Promise<void> {
        if (timer != null) clearTimeout(timer);
        pending?.();
        pending = null;
        state.query = query;
        if (query.trim() === "") {
            latest++;
            state.hits = [];
            state.searching = false;
            state.error = null;
            return Promise.resolve();
        }
        state.searching = true;
        return new Promise((resolve) => {
            pending = resolve;
            timer = setTimeout(() => {
                pending = null;
                void searchNow(query).then(resolve);
            }, options.debounceMs ?? 150);
        });
    }

    async function searchNow(query: string): Promise<void> {
        const ticket = ++latest;
        const result = await request(bridge, "search:messages", {query});
        if (ticket !== latest) return; // a newer search is under way
        state.searching = false;
        if (!succeeded(result, state, "Could not search the messages")) return;
        state.hits = result.value;
    }

    return {state, run};
}
