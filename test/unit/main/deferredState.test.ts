// The engine's one unwritten KV state (Full KV's sequence after an answer): written when asked, or before a request that
// does not continue its conversation changes the context; dropped when a request continues it; every outcome heard.
import {describe, expect, it} from "vitest";
import {DeferredState, type Deferred} from "../../../main/engine/states/DeferredState.js";
import type {StateSave} from "../../../main/engine/EngineApi.js";

function setup() {
    const settled: StateSave[] = [];
    const writes: string[] = [];
    const state = new DeferredState((save) => settled.push(save));
    const context = {};
    const deferred = (path: string, continuedAt = 100, owner: object = context): Deferred => ({
        path,
        owner,
        continuedAt: () => continuedAt,
        write: async () => {
            writes.push(path);
            return {saved: {path, bytes: 10, tokens: 120, liveCells: 120, liveBytes: 8, fullBytes: 8}, note: null};
        }
    });
    return {state, settled, writes, context, deferred};
}

describe("DeferredState", () => {
    it("writes nothing until asked, then once; asked for another file it writes nothing", async () => {
        const {state, settled, writes, deferred} = setup();
        state.defer(deferred("/s/a.state"));
        expect(writes).toEqual([]);
        expect(state.path).toBe("/s/a.state");
        expect(await state.flush("/s/other.state")).toBeNull();
        expect(writes).toEqual([]);
        const save = await state.flush("/s/a.state");
        expect(save?.saved?.bytes).toBe(10);
        expect(await state.flush()).toBeNull();
        expect(writes).toEqual(["/s/a.state"]);
        expect(settled.map((entry) => entry.path)).toEqual(["/s/a.state"]);
        expect(state.path).toBeNull();
    });

    it("is written before a change that does not keep its prompt (another conversation, a new context)", async () => {
        const {state, writes, context, deferred} = setup();
        state.defer(deferred("/s/a.state", 100));
        await state.beforeChange(context, 99);
        expect(writes).toEqual(["/s/a.state"]);

        state.defer(deferred("/s/b.state", 100));
        await state.beforeChange({}, 500); // another context keeps nothing of this one
        expect(writes).toEqual(["/s/a.state", "/s/b.state"]);
    });

    it("is dropped unwritten when the change continues its conversation, and says it was superseded", async () => {
        const {state, settled, writes, context, deferred} = setup();
        state.defer(deferred("/s/a.state", 100));
        await state.beforeChange(context, 100);
        expect(writes).toEqual([]);
        expect(settled).toEqual([{path: "/s/a.state", saved: null, note: null, superseded: true}]);
        expect(await state.flush()).toBeNull();
    });

    it("never takes a change that keeps nothing for a continuation, however short the prompt", async () => {
        const {state, writes, context, deferred} = setup();
        state.defer(deferred("/s/a.state", 0));
        await state.beforeChange(context, 0);
        expect(writes).toEqual(["/s/a.state"]);
    });

    it("turns a failed write into a note, and a newer answer's state supersedes one still waiting", async () => {
        const {state, settled, deferred} = setup();
        state.defer({...deferred("/s/a.state"), write: async () => Promise.reject(new Error("ENOSPC: no space left on device"))});
        expect(await state.flush()).toMatchObject({
            path: "/s/a.state",
            saved: null,
            note: expect.stringMatching(/could not be saved: ENOSPC/)
        });
        state.defer(deferred("/s/b.state"));
        state.defer(deferred("/s/c.state"));
        expect(settled.at(-1)).toEqual({path: "/s/b.state", saved: null, note: null, superseded: true});
        state.drop();
        expect(await state.flush()).toBeNull();
    });
});
