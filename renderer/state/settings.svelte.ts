import type {AppSettings, PonderApi} from "../../preload/contract.js";
import {describeError} from "../lib/describeError.js";
import {request} from "./request.js";

export type Settings = ReturnType<typeof createSettings>;
export type Theme = AppSettings["theme"];

/** App settings the renderer shows: the theme. */
export function createSettings(bridge: PonderApi) {
    const state = $state({
        theme: "system" as Theme,
        error: null as string | null
    });

    async function load(): Promise<void> {
        const result = await request(bridge, "settings:get", undefined);
        if (!result.ok) {
            state.error = describeError("Could not read the settings", result.error);
            return;
        }
        state.theme = result.value.theme;
        state.error = null;
    }

    /** Applies the theme at once and stores it; reverts when storing fails. */
    async function setTheme(theme: Theme): Promise<void> {
        const previous = state.theme;
        state.theme = theme;
        const result = await request(bridge, "settings:update", {theme});
        if (!result.ok) {
            state.theme = previous;
            state.error = describeError("Could not save the theme", result.error);
            return;
        }
        state.theme = result.value.theme;
        state.error = null;
    }

    return {state, load, setTheme};
}
