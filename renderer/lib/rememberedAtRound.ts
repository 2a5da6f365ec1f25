import {evictedThrough} from "../../preload/contract.js";
import type {RememberedView} from "../state/memory.svelte.js";
import {count} from "./formatMemory.js";

/**
 * The view as it stood once the answer's `view.rounds[index]` had run: the tokens written by then, and what its rounds had
 * evicted by then. `view` itself from `index = view.rounds.length` on (the answer's end).
 */
export function rememberedAtRound(view: RememberedView, index: number): RememberedView {
    const round = view.rounds[index];
    if (round == null) return view;
    return {...view, tokensSeen: round.tokensSeen, evicted: evictedThrough(view.rounds, index)};
}

/** Where the round scrubber stands: `"After round 12 of 15, 340 tokens into the answer"`, or the answer's end. */
export function describeRound(view: RememberedView, index: number): string {
    const rounds = view.rounds.at(-1)?.last ?? 0;
    const round = view.rounds[index];
    if (round == null) return `At the end of the answer, after all ${count(rounds)} prune round${rounds === 1 ? "" : "s"}`;
    const which = round.first === round.last ? `round ${count(round.last)}` : `rounds ${count(round.first)}–${count(round.last)}`;
    return `After ${which} of ${count(rounds)}, ${count(round.step)} token${round.step === 1 ? "" : "s"} into the answer`;
}
