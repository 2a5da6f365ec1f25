import type {AppSettings, ConversationSettings, PonderApi, SamplingPreset} from "../../preload/contract.js";
import {describeError} from "../lib/describeError.js";
import {request} from "./request.js";
import {succeeded} from "./succeeded.js";

export type Settings = ReturnType<typeof createSettings>;
export type Theme = AppSettings["theme"];

/** App settings the renderer shows: the theme, and the settings new conversations start with. */
export function createSettings(bridge: PonderApi) {
    const state = $state({
        theme: "system" as Theme,
        /** Settings of conversations created from now on; `null` until read. */
        conversationDefaults: null as ConversationSettings | null,
        /** Sampling presets the user saved. */
        samplingPresets: [] as SamplingPreset[],
        error: null as string | null
    });

    async function load(): Promise<void> {
        const result = await request(bridge, "settings:get", undefined);
        if (!succeeded(result, state, "Could not read the settings")) return;
        state.theme = result.value.theme;
        state.conversationDefaults = result.value.defaultConversationSettings;
        state.samplingPresets = result.value.samplingPresets;
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

    /** Changes the settings new conversations start with; the reason as a sentence when it failed, else `null`. */
    async function saveConversationDefaults(patch: Partial<ConversationSettings>): Promise<string | null> {
        if (state.conversationDefaults == null) await load();
        const current = state.conversationDefaults;
        if (current == null) return state.error ?? "Could not read the current defaults";
        const result = await request(bridge, "settings:update", {defaultConversationSettings: {...$state.snapshot(current), ...patch}});
        if (!result.ok) return describeError("Could not save the defaults", result.error);
        state.conversationDefaults = result.value.defaultConversationSettings;
        return null;
    }

    /** Stores the presets (a preset of the same name is replaced); the reason as a sentence when it failed, else `null`. */
    async function savePresets(presets: SamplingPreset[]): Promise<string | null> {
        const result = await request(bridge, "settings:update", {samplingPresets: presets});
        if (!result.ok) return describeError("Could not save the presets", result.error);
        state.samplingPresets = result.value.samplingPresets;
        return null;
    }

    return {state, load, setTheme, saveConversationDefaults, savePresets};
}
