import type {PonderApi, SavedStatesUsage} from "../../preload/contract.js";
import {describeError} from "../lib/describeError.js";
import {parseDiskBudget} from "../lib/diskBudget.js";
import {request} from "./request.js";
import {succeeded} from "./succeeded.js";

export type SavedStates = ReturnType<typeof createSavedStates>;

/** The conversations' saved KV states as the Engine panel shows them: their disk budget, what they take now, deleting them. */
export function createSavedStates(bridge: PonderApi) {
    const state = $state({
        /** The disk budget in MiB (0: no state is saved); `null` until read. */
        budgetMib: null as number | null,
        /** What the states take on disk now; `null` until read. */
        usage: null as SavedStatesUsage | null,
        /** Why the budget typed cannot be stored, in words; `null` when it can. */
        budgetError: null as string | null,
        clearing: false,
        error: null as string | null
    });

    async function load(): Promise<void> {
        const [settings, usage] = await Promise.all([
            request(bridge, "settings:get", undefined),
            request(bridge, "states:usage", undefined)
        ]);
        if (settings.ok) state.budgetMib = settings.value.stateDiskBudgetMib;
        if (usage.ok) state.usage = usage.value;
        const failed = !settings.ok ? settings.error : !usage.ok ? usage.error : null;
        state.error = failed == null ? null : describeError("Could not read the saved states", failed);
    }

    /** Validates and stores the budget typed (`"4 GiB"`, `"512 MiB"`, `"0"`); `false` when refused, with the reason in `budgetError`. */
    async function setBudget(text: string): Promise<boolean> {
        const parsed = parseDiskBudget(text);
        if (!parsed.ok) {
            state.budgetError = parsed.message;
            return false;
        }
        const result = await request(bridge, "settings:update", {stateDiskBudgetMib: parsed.mib});
        if (!result.ok) {
            state.budgetError = describeError("Could not save the disk budget", result.error);
            return false;
        }
        state.budgetMib = result.value.stateDiskBudgetMib;
        state.budgetError = null;
        // A lower budget deletes the oldest states at once.
        const usage = await request(bridge, "states:usage", undefined);
        if (usage.ok) state.usage = usage.value;
        return true;
    }

    /** Deletes every saved state; conversations then read their history again. */
    async function clear(): Promise<void> {
        if (state.clearing) return;
        state.clearing = true;
        const result = await request(bridge, "states:clear", undefined);
        state.clearing = false;
        if (!succeeded(result, state, "Could not delete the saved states")) return;
        state.usage = result.value;
    }

    return {state, load, setBudget, clear};
}
