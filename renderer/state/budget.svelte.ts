import {
    mibOfBytes,
    type BudgetEstimate,
    type CompressionSettings,
    type ConversationSettings,
    type KvBudget,
    type NewConversationCompression,
    type PolicyId,
    type PolicyParams,
    type PonderApi
} from "../../preload/contract.js";
import {
    checkBudgetCap,
    describeCap,
    historyNote,
    toCompression,
    toForm,
    validateBudgetForm,
    type BudgetCap,
    type BudgetForm
} from "../lib/budgetForm.js";
import {describeBudgetScope} from "../lib/describeBudgetScope.js";
import {describeSetting} from "../lib/describeCompression.js";
import {describeError} from "../lib/describeError.js";
import {describeTrainedBudget} from "../lib/describeTrainedBudget.js";
import {isTunable, leanKvPair, policyDefaults, policyEntry, sharedDefaults} from "../lib/policies.js";
import type {Conversations} from "./conversations.svelte.js";
import {request} from "./request.js";
import {succeeded} from "./succeeded.js";
import type {Settings} from "./settings.svelte.js";

export type Budget = ReturnType<typeof createBudget>;

export type BudgetOptions = {
    /** Quiet time after the last edit before the estimate is asked for. Defaults to `300`. */
    debounceMs?: number;
    /** Tokens the open conversation holds (`conversationTokens`), to flag a budget too small for it. Defaults to `null` (unknown). */
    conversationTokens?: () => number | null;
};

type Option = "kvType" | "kvTypeV" | "flashAttention" | "combine" | "pruneEvery";

/**
 * The budget controller of the open conversation: a draft of its compression settings, checked as it is edited,
 * what the draft means for the model (`compression:estimate`, debounced), apply, reset and save as default.
 */
export function createBudget(bridge: PonderApi, conversations: Conversations, settings: Settings, options: BudgetOptions = {}) {
    const debounceMs = options.debounceMs ?? 300;
    const state = $state({
        conversationId: null as string | null,
        form: null as BudgetForm | null,
        estimate: null as BudgetEstimate | null,
        estimating: false,
        /** Why there is no estimate (no model loaded, the backend refused). */
        estimateError: null as string | null,
        applying: false,
        savingDefault: false,
        /** The backend's answer when apply or save failed. */
        error: null as string | null,
        /** A short confirmation after apply or save. */
        notice: null as string | null,
        /** What the loaded model allows a budget, from its latest estimate; `null` before one (or without a model). */
        cap: null as BudgetCap | null,
        /** What a conversation created now starts under, read with each estimate; `null` before one is read. */
        newConversation: null as NewConversationCompression | null
    });
    // The settings object the form was loaded from, to tell a new one from the same one seen again.
    let loadedFrom: ConversationSettings | null = null;
    let estimateKey: string | null = null;
    let estimateSeq = 0;
    let timer: ReturnType<typeof setTimeout> | null = null;

    const formErrors = $derived(state.form ? validateBudgetForm(state.form) : {});
    // Above the model's context: an error too, though the draft is still estimated (the estimate shows the cap).
    const capError = $derived(state.form && formErrors.budget == null ? checkBudgetCap(state.form, state.cap) : null);
    const errors: Record<string, string> = $derived(capError != null ? {budget: capError, ...formErrors} : formErrors);
    const estimable = $derived(state.form != null && Object.keys(formErrors).length === 0);
    const valid = $derived(estimable && capError == null);
    /** The draft's settings once the form's own checks pass: what is estimated. */
    const draft = $derived(state.form && estimable ? toCompression(state.form) : null);
    /** The draft's settings once every check passes: what is applied or saved. */
    const compression = $derived(valid ? draft : null);
    const applied = $derived(conversations.state.settings?.compression ?? null);
    const dirty = $derived(state.form != null && applied != null && JSON.stringify(toCompression(state.form)) !== JSON.stringify(applied));
    /** The estimate describes other values than the form's (being edited, or invalid). */
    const stale = $derived(state.estimate != null && (draft == null || JSON.stringify(draft) !== estimateKey));
    /** The draft's budget in cells: the fresh estimate's, else the typed cells. */
    const draftCells = $derived(
        state.estimate != null && !stale ? state.estimate.cells : state.form?.budgetKind === "cells" ? state.form.cells : null
    );
    const history = $derived(state.form ? historyNote(options.conversationTokens?.() ?? null, draftCells, state.form.policy) : null);
    /** With a policy that reads the gates chosen (TRIM-KV), their trained budget when the draft asks for another: offered as a starting budget. */
    const trainedBudget = $derived.by(() => {
        const trained = state.estimate?.trainedBudget;
        const form = state.form;
        if (
            form == null ||
            !policyEntry(form.policy).reads.gates ||
            trained == null ||
            (form.budgetKind === "cells" && form.cells === trained.cells)
        )
            return null;
        return {cells: trained.cells, line: describeTrainedBudget(trained)};
    });

    function cancelEstimate(): void {
        if (timer != null) clearTimeout(timer);
        timer = null;
    }

    async function estimate(): Promise<void> {
        cancelEstimate();
        const seq = ++estimateSeq;
        const wanted = draft;
        if (wanted == null) {
            state.estimating = false;
            return;
        }
        state.estimating = true;
        const result = await request(bridge, "compression:estimate", {compression: $state.snapshot(wanted)});
        if (seq !== estimateSeq) return;
        state.estimating = false;
        if (!result.ok) {
            state.estimate = null;
            estimateKey = null;
            if (result.error.code === "MODEL_NOT_LOADED") state.cap = null;
            state.estimateError =
                result.error.code === "MODEL_NOT_LOADED"
                    ? "Load a model to see what this budget means for it."
                    : describeError("Could not estimate the budget", result.error);
            return;
        }
        state.estimate = result.value;
        void readNewConversation();
        const {maxCells, modelContextLength, bytesPerCell} = result.value;
        state.cap = {maxCells, modelContextLength, bytesPerCell, kvType: wanted.kvType, kvTypeV: wanted.kvTypeV};
        estimateKey = JSON.stringify(wanted);
        state.estimateError = null;
    }

    /** Reads what new conversations start under (the loaded model's retention gates decide it until a default is saved). */
    async function readNewConversation(): Promise<void> {
        const result = await request(bridge, "compression:newConversation", undefined);
        if (result.ok) state.newConversation = result.value;
    }

    function scheduleEstimate(): void {
        cancelEstimate();
        // Nothing to ask while the draft is invalid: the error says why.
        if (!estimable) {
            estimateSeq++;
            state.estimating = false;
            return;
        }
        timer = setTimeout(() => void estimate(), debounceMs);
    }

    function changed(): void {
        state.error = null;
        state.notice = null;
        scheduleEstimate();
    }

    /** Shows the conversation's settings (again when they are a new object); estimates them at once. */
    function load(conversationId: string | null, settings: ConversationSettings | null): void {
        if (conversationId === state.conversationId && settings === loadedFrom) return;
        const other = conversationId !== state.conversationId;
        state.conversationId = conversationId;
        loadedFrom = settings;
        state.form = settings ? toForm($state.snapshot(settings.compression) as CompressionSettings) : null;
        if (other) {
            state.error = null;
            state.notice = null;
            state.estimate = null;
            state.estimateError = null;
            estimateKey = null;
        }
        if (state.form) void estimate();
        else cancelEstimate();
    }

    function setPolicy(policy: PolicyId): void {
        if (!state.form) return;
        state.form.policy = policy;
        // per-head cells are one policy's: another that prunes goes back to its own way of combining
        const entry = policyEntry(policy);
        if (state.form.combine === "heads" && !entry.headCells && !entry.keepsEveryToken) state.form.combine = "auto";
        changed();
    }

    /** Switching kind shows the same budget in the new unit when the estimate knows it. */
    function setBudgetKind(kind: KvBudget["kind"]): void {
        const form = state.form;
        if (!form || form.budgetKind === kind) return;
        const known = stale ? null : state.estimate;
        if (kind === "cells") form.cells = known?.cells ?? form.cells ?? 4096;
        else if (kind === "mib") form.mib = known ? Math.max(0.01, mibOfBytes(known.bytes, "round")) : (form.mib ?? 512);
        form.budgetKind = kind;
        changed();
    }

    /** The number in the budget field: cells or MiB by the kind; `null` for auto. */
    function budgetValue(): number | null {
        const form = state.form;
        return form?.budgetKind === "cells" ? form.cells : form?.budgetKind === "mib" ? form.mib : null;
    }

    function setBudgetValue(value: number | null | undefined): void {
        const form = state.form;
        if (!form || form.budgetKind === "auto") return;
        const number = value == null || Number.isNaN(value) ? null : value;
        if (form.budgetKind === "cells") form.cells = number;
        else form.mib = number;
        changed();
    }

    /** Sets the budget to the cells TRIM-KV's gates were trained at (`trainedBudget`). */
    function useTrainedBudget(): void {
        const form = state.form;
        if (!form || trainedBudget == null) return;
        form.budgetKind = "cells";
        form.cells = trainedBudget.cells;
        changed();
    }

    function param(policy: keyof PolicyParams, key: string): number | null {
        return (state.form?.params[policy] as Record<string, number | null> | undefined)?.[key] ?? null;
    }

    function setParam(policy: keyof PolicyParams, key: string, value: number | null | undefined): void {
        if (!state.form) return;
        (state.form.params[policy] as Record<string, number | null>)[key] = value == null || Number.isNaN(value) ? null : value;
        changed();
    }

    /** A choice parameter's value (ReFreeKV's mode); `null` without a form. */
    function choice(policy: keyof PolicyParams, key: string): string | null {
        const value = (state.form?.params[policy] as Record<string, unknown> | undefined)?.[key];
        return typeof value === "string" ? value : null;
    }

    /** Sets a choice parameter to one of its options (preload/policyCatalogue.ts). */
    function setChoice(policy: keyof PolicyParams, key: string, value: string): void {
        if (!state.form) return;
        (state.form.params[policy] as Record<string, unknown>)[key] = value;
        changed();
    }

    function setRefreeKvMode(mode: PolicyParams["refreekv"]["mode"]): void {
        setChoice("refreekv", "mode", mode);
    }

    function setOption<K extends Option>(key: K, value: BudgetForm[K]): void {
        if (!state.form) return;
        state.form[key] = value;
        // llama.cpp keeps a quantized V cache only with flash attention: choosing one turns it on.
        if (key === "kvTypeV" && value !== "f16") state.form.flashAttention = true;
        changed();
    }

    /** LeanKV's recommended pair, K8V4: Q8_0 keys and Q4_0 values (flash attention on, which Q4_0 values need). */
    function useLeanKvPair(): void {
        if (!state.form) return;
        state.form.kvType = leanKvPair.kvType;
        state.form.kvTypeV = leanKvPair.kvTypeV;
        state.form.flashAttention = true;
        changed();
    }

    /** The chosen policy's parameters back to the papers' values, and the prune cadence and combine mode to the app's. */
    function resetDefaults(): void {
        const form = state.form;
        if (!form) return;
        if (isTunable(form.policy)) (form.params as Record<string, unknown>)[form.policy] = {...policyDefaults[form.policy]};
        form.pruneEvery = sharedDefaults.pruneEvery;
        form.combine = sharedDefaults.combine;
        changed();
    }

    /** Stores the draft as the conversation's settings; they apply from its next answer. */
    async function apply(): Promise<boolean> {
        const id = state.conversationId;
        const wanted = compression;
        if (id == null || !state.form) return false;
        if (wanted == null) {
            state.notice = null;
            return false;
        }
        state.applying = true;
        state.error = null;
        state.notice = null;
        const result = await request(bridge, "conversations:updateSettings", {id, settings: {compression: $state.snapshot(wanted)}});
        state.applying = false;
        if (state.conversationId !== id) return result.ok;
        if (!succeeded(result, state, "Not applied")) return false;
        if (conversations.state.selectedId === id) {
            conversations.state.settings = result.value;
            loadedFrom = conversations.state.settings;
        }
        // The list names each conversation's policy.
        const item = conversations.state.items.find((entry) => entry.id === id);
        if (item) item.policy = result.value.compression.policy;
        state.form = toForm(result.value.compression);
        state.notice =
            `Applied to this conversation: its next answer runs under ${describeSetting(result.value.compression)}. ` +
            "Other conversations keep their own settings, and new ones start with the defaults.";
        return true;
    }

    /** Makes the draft the compression of conversations created from now on. */
    async function saveAsDefault(): Promise<boolean> {
        const wanted = compression;
        if (wanted == null) return false;
        state.savingDefault = true;
        state.error = null;
        state.notice = null;
        const failure = await settings.saveConversationDefaults({compression: $state.snapshot(wanted)});
        state.savingDefault = false;
        if (failure) {
            state.error = failure;
            return false;
        }
        void readNewConversation();
        state.notice =
            `Saved: new conversations start with ${describeSetting(wanted)}. Existing conversations keep their own settings` +
            (dirty ? "; Apply to this conversation to use it here too." : ".");
        return true;
    }

    return {
        state,
        /** Field -> message for what is wrong in the draft (`budget`, `pruneEvery`, `flashAttention`, `params.<policy>.<key>`). */
        get errors() {
            return errors;
        },
        /** The message the controller shows beside Apply: the first mistake in the draft, else the backend's refusal. */
        get message() {
            return Object.values(errors)[0] ?? state.error;
        },
        /** The most the budget may be on the loaded model, in words ("At most 4,096 cells: the model's context."); `null` when unknown. */
        get capHint() {
            return state.form ? describeCap(state.form.budgetKind, state.cap, state.form) : null;
        },
        /** Which conversations a change affects, in words: this one only, with what new ones start with. */
        get scope() {
            return describeBudgetScope(compression, settings.state.conversationDefaults?.compression, state.newConversation);
        },
        /** The open conversation is longer than the draft's budget holds (Full KV refuses it, a pruning policy prunes it), in words. */
        get historyNote() {
            return history;
        },
        /** Policies the loaded model cannot run, each with why (its latest estimate): TRIM-KV without gates trained for it. */
        get unavailable(): Partial<Record<PolicyId, string>> {
            return Object.fromEntries((state.estimate?.unavailablePolicies ?? []).map(({policy, reason}) => [policy, reason]));
        },
        get valid() {
            return valid;
        },
        /** The draft differs from the conversation's stored settings. */
        get dirty() {
            return dirty;
        },
        get stale() {
            return stale;
        },
        /** TRIM-KV is chosen and its gates were trained at another budget than the draft's: the cells, and where they come from in one line. */
        get trainedBudget() {
            return trainedBudget;
        },
        load,
        estimate,
        setPolicy,
        setBudgetKind,
        budgetValue,
        setBudgetValue,
        useTrainedBudget,
        param,
        setParam,
        choice,
        setChoice,
        setRefreeKvMode,
        setOption,
        useLeanKvPair,
        resetDefaults,
        apply,
        saveAsDefault,
        dispose(): void {
            cancelEstimate();
            estimateSeq++;
        }
    };
}
