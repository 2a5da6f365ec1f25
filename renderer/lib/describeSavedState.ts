import type {SavedStateFigures} from "../../preload/contract.js";
import {count, formatMemory, formatPercent, savingsOf} from "./formatMemory.js";

/**
 * The saved state's lines: `"12.3 MiB on disk · 4,096 tokens, 1,024 cells kept"` and `"A Full cache of the same tokens:
 * 48.0 MiB (the file is 74% smaller)"`.
 */
export function describeSavedState(state: SavedStateFigures): {disk: string; full: string} {
    const kept = state.liveCells < state.tokens ? `, ${count(state.liveCells)} cells kept` : "";
    const share = savingsOf(state.bytes, state.fullBytes);
    const compared =
        share == null
            ? ""
            : share >= 0
              ? ` (the file is ${formatPercent(share)} smaller)`
              : ` (the file is ${formatPercent(-share)} larger)`;
    return {
        disk: `${formatMemory(state.bytes)} on disk · ${count(state.tokens)} tokens${kept}`,
        full: `A Full cache of the same tokens: ${state.fullBytes > 0 ? `${formatMemory(state.fullBytes)}${compared}` : "–"}`
    };
}

/** `"Resumed from disk (4,096 tokens)"`: the answer started from a saved state instead of reading the history again. */
export function describeResumed(tokens: number): string {
    return `Resumed from disk (${count(tokens)} tokens)`;
}
