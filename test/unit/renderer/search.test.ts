import {describe, expect, test} from "vitest";
import type {SearchHit} from "../../../preload/contract.js";
import {createSearch, snippetParts} from "../../../renderer/state/search.svelte.js";
import {createFakeBridge} from "./fakeBridge.js";

const hit = (messageId: string): SearchHit => ({
    conversationId: "c1",
    conversationTitle: "Primes",
    messageId,
    role: "assistant",
    field: "thinking",
    snippet: "the \u0002sieve\u0003 of",
    terms: ["sieve"]
});

describe("message search state", () => {
    test("cuts a snippet into plain and matched parts", () => {
        expect(snippetParts("…use the \u0002sieve\u0003 of \u0002Erat\u0003osthenes")).toEqual([
            {text: "…use the ", match: false},
            {text: "sieve", match: true},
            {text: " of ", match: false},
            {text: "Erat", match: true},
            {text: "osthenes", match: false}
        ]);
        expect(snippetParts("\u0002all\u0003")).toEqual([{text: "all", match: true}]);
    });

    test("searches after a pause, keeps only the latest answer, and clears at once on an empty query", async () => {
        const bridge = createFakeBridge();
        const search = createSearch(bridge.api, {debounceMs: 5});
        bridge.handle("search:messages", async ({query}) => {
            if (query === "si") await new Promise((resolve) => setTimeout(resolve, 30)); // an older, slower answer
            return {ok: true, value: query === "si" ? [hit("old")] : [hit("new")]};
        });
        const first = search.run("s");
        const second = search.run("si");
        expect(search.state.searching).toBe(true);
        await first; // superseded: resolves at once
        await new Promise((resolve) => setTimeout(resolve, 15)); // "si" is asked, and answers slowly
        const third = search.run("sieve");
        await Promise.all([second, third]);
        await new Promise((resolve) => setTimeout(resolve, 40));
        expect(bridge.calls.map((call) => (call.payload as {query: string}).query)).toEqual(["si", "sieve"]);
        expect(search.state.hits.map((found) => found.messageId)).toEqual(["new"]);
        expect(search.state.searching).toBe(false);

        await search.run("   ");
        expect(search.state.hits).toEqual([]);
        expect(bridge.calls).toHaveLength(2);
    });

    test("a failed search says why", async () => {
        const bridge = createFakeBridge();
        const search = createSearch(bridge.api, {debounceMs: 0});
        bridge.fail("search:messages", "STORAGE", "database is locked");
        await search.run("x");
        expect(search.state.error).toBe("Could not search the messages: database is locked");
    });
});
