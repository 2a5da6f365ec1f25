import type {EngineBuildChoice, EngineBuilds, PonderApi} from "../../preload/contract.js";
import {describeError} from "../lib/describeError.js";
import {request} from "./request.js";
import {succeeded} from "./succeeded.js";

export type EngineBuildsState = ReturnType<typeof createEngineBuilds>;

/** The engine-build setting as the Engine panel shows it: the builds present, the choice, and a change under way. */
export function createEngineBuilds(bridge: PonderApi) {
    const state = $state({
        /** The builds present and the choice; `null` until read. */
        builds: null as EngineBuilds | null,
        /** The choice being applied (the engine restarting on it); `null` when none is. */
        switching: null as EngineBuildChoice | null,
        error: null as string | null
    });

    async function load(): Promise<void> {
        const result = await request(bridge, "engine:builds", undefined);
        if (!succeeded(result, state, "Could not list the engine builds")) return;
        state.builds = result.value;
    }

    /**
     * Stores the choice and restarts the engine on it (the model loaded again; the status bar follows it). When it fails,
     * says why and reads the builds again: the choice may be stored although the engine did not come back on it.
     */
    async function choose(choice: EngineBuildChoice): Promise<boolean> {
        if (state.switching != null) return false;
        state.switching = choice;
        state.error = null;
        const result = await request(bridge, "engine:setBuild", {build: choice});
        state.switching = null;
        if (!result.ok) {
            state.error = describeError("Could not change the engine build", result.error);
            const error = state.error;
            await load();
            state.error = error;
            return false;
        }
        state.builds = result.value;
        return true;
    }

    return {state, load, choose};
}
