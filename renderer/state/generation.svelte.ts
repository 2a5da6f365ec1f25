import type {ConversationSettings, GenerationCapabilities, PonderApi, SamplingValues} from "../../preload/contract.js";
import {describeError} from "../lib/describeError.js";
import {samplingKeys, toGenerationForm, toGenerationSettings, validateGenerationForm, type GenerationForm} from "../lib/generationForm.js";
import type {Conversations} from "./conversations.svelte.js";
import {request} from "./request.js";
import type {Settings} from "./settings.svelte.js";

export type Generation = ReturnType<typeof createGeneration>;

/**
 * The open conversation's generation settings (system prompt, sampling, max tokens, thinking): a draft checked as it
 * is edited, applied to the conversation (from its next answer) or saved as the default for new conversations; named
 * sampling presets, and what the loaded model recommends.
 */
export function createGeneration(bridge: PonderApi, conversations: Conversations, settings: Settings) {
    const state = $state({
        conversationId: null as string | null,
        form: null as GenerationForm | null,
        applying: false,
        error: null as string | null,
        notice: null as string | null,
        /** What the loaded model offers (thinking toggle, recommended sampling); `null` without a model. */
        capabilities: null as GenerationCapabilities | null
    });
    let loadedFrom: ConversationSettings | null = null;

    const errors = $derived(state.form ? validateGenerationForm(state.form) : {});
    const valid = $derived(state.form != null && Object.keys(errors).length === 0);
    const stored = $derived(conversations.state.settings);
    const dirty = $derived(state.form != null && stored != null && JSON.stringify(state.form) !== JSON.stringify(toGenerationForm(stored)));

    /** Shows `settings` (the conversation's stored ones) unless they are the ones already shown. */
    function load(conversationId: string | null, loaded: ConversationSettings | null): void {
        if (conversationId === state.conversationId && loaded === loadedFrom) return;
        const other = conversationId !== state.conversationId;
        state.conversationId = conversationId;
        loadedFrom = loaded;
        if (loaded == null) {
            state.form = null;
            return;
        }
        if (other || !dirty) {
            state.form = toGenerationForm(loaded);
            state.error = null;
            state.notice = null;
        }
    }

    function set<K extends keyof GenerationForm>(key: K, value: GenerationForm[K]): void {
        if (!state.form) return;
        state.form[key] = (typeof value === "number" && Number.isNaN(value) ? null : value) as GenerationForm[K];
        state.notice = null;
    }

    async function apply(): Promise<boolean> {
        const id = state.conversationId;
        if (id == null || !state.form || !valid) return false;
        state.applying = true;
        state.error = null;
        state.notice = null;
        const result = await request(bridge, "conversations:updateSettings", {
            id,
            settings: toGenerationSettings($state.snapshot(state.form))
        });
        state.applying = false;
        if (state.conversationId !== id) return result.ok;
        if (!result.ok) {
            state.error = describeError("Not applied", result.error);
            return false;
        }
        if (conversations.state.selectedId === id) {
            conversations.state.settings = result.value;
            // What the panel will be handed back: the state's proxy of it, not the object assigned.
            loadedFrom = conversations.state.settings;
        }
        state.form = toGenerationForm(result.value);
        state.notice = "Applied to this conversation, from its next answer. Other conversations keep their own settings.";
        return true;
    }

    /** Reads what the loaded model offers; called when the panel opens and when another model loads. */
    async function refreshCapabilities(): Promise<void> {
        const result = await request(bridge, "generation:capabilities", undefined);
        state.capabilities = result.ok ? result.value : null;
    }

    /** Puts sampling values (a preset, a recommendation) into the draft; apply stores them. */
    function useSampling(values: SamplingValues): void {
        if (!state.form) return;
        for (const key of samplingKeys) state.form[key] = values[key];
        state.notice = null;
        state.error = null;
    }

    /** Saves the draft's sampling values under `name`, replacing a preset of that name. */
    async function savePreset(name: string): Promise<boolean> {
        const trimmed = name.trim();
        if (!state.form) return false;
        if (trimmed === "") {
            state.error = "Name the preset to save it.";
            return false;
        }
        if (samplingKeys.some((key) => key in errors)) {
            state.error = "Correct the sampling values before saving them as a preset.";
            return false;
        }
        const form = $state.snapshot(state.form);
        const preset = {name: trimmed, ...(Object.fromEntries(samplingKeys.map((key) => [key, form[key]!])) as SamplingValues)};
        const others = settings.state.samplingPresets.filter((existing) => existing.name.toLowerCase() !== trimmed.toLowerCase());
        const failure = await settings.savePresets([...$state.snapshot(others), preset]);
        state.error = failure;
        state.notice = failure == null ? `Saved the preset "${trimmed}".` : null;
        return failure == null;
    }

    async function deletePreset(name: string): Promise<boolean> {
        const failure = await settings.savePresets(
            $state.snapshot(settings.state.samplingPresets).filter((preset) => preset.name !== name)
        );
        state.error = failure;
        state.notice = failure == null ? `Deleted the preset "${name}".` : null;
        return failure == null;
    }

    /**
     * When the panel closes: a draft with mistakes (which could never be applied) is dropped and the stored settings show
     * again. A valid draft not applied yet stays, with its "Not applied yet". Returns whether one was dropped.
     */
    function discardInvalid(): boolean {
        if (state.form == null || valid || stored == null) return false;
        state.form = toGenerationForm(stored);
        state.error = null;
        state.notice = null;
        return true;
    }

    async function saveAsDefault(): Promise<boolean> {
        if (!state.form || !valid) return false;
        state.error = null;
        state.notice = null;
        const failure = await settings.saveConversationDefaults(toGenerationSettings($state.snapshot(state.form)));
        if (failure) {
            state.error = failure;
            return false;
        }
        state.notice =
            "Saved: new conversations start with these settings. Existing conversations keep their own" +
            (dirty ? "; Apply to this conversation to use them here too." : ".");
        return true;
    }

    return {
        state,
        get errors() {
            return errors;
        },
        get valid() {
            return valid;
        },
        /** The draft differs from the conversation's stored settings. */
        get dirty() {
            return dirty;
        },
        /**
         * The line beside Apply: how many fields need correcting (each says why under itself), else the backend's refusal
         * or a failed preset; `null` when there is nothing wrong.
         */
        get message() {
            const count = Object.keys(errors).length;
            if (count > 0)
                return count === 1 ? "Correct the field marked in red to apply." : `Correct the ${count} fields marked in red to apply.`;
            return state.error;
        },
        load,
        set,
        apply,
        saveAsDefault,
        discardInvalid,
        refreshCapabilities,
        useSampling,
        savePreset,
        deletePreset
    };
}
