import type {ReadReason} from "../../../preload/contract/engine.js";

export type PromptReading = {
    /** Tokens of the earlier turns (system prompt included); 0 when the prompt has no earlier turn. */
    earlierTokens: number;
    /** Whether the context was made anew for this answer, replacing one with other settings. */
    newContext: boolean;
    /** Tokens of the prompt already in the context (a cached prefix or a loaded state). */
    reused: number;
    /** Tokens of the prompt to read now. */
    missing: number;
};

/** Tokens a read needs before its progress shows: a short message is read before anyone could look. */
const shownFrom: Record<ReadReason, number> = {message: 512, conversation: 256, settings: 256};

/**
 * Why a prompt is read into the context (the progress's wording): mostly the earlier turns, which the context did not
 * hold (`settings` in a context made anew, else `conversation`), or mostly the new message. `null` when the read is
 * too short for its progress to be worth showing.
 */
export function readReason({earlierTokens, newContext, reused, missing}: PromptReading): ReadReason | null {
    const earlierRead = Math.max(0, earlierTokens - reused);
    const reason: ReadReason = earlierRead * 2 > missing ? (newContext ? "settings" : "conversation") : "message";
    return missing >= shownFrom[reason] ? reason : null;
}
