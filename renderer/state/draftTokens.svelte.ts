import type {PonderApi, TokenCount} from "../../preload/contract.js";
import {draftBudgetHint} from "../lib/draftBudgetHint.js";
import {request} from "./request.js";

export type DraftTokens = ReturnType<typeof createDraftTokens>;

export type DraftTokensOptions = {
    /** Quiet time after the last keystroke before the message is counted. Defaults to `300`. */
    debounceMs?: number;
};

/**
 * The composer's message counted against its conversation's KV budget while it is typed (`chat:countTokens`,
 * debounced; an answer to an older request is dropped), and what the composer says about it (`draftBudgetHint`).
 */
export function createDraftTokens(bridge: PonderApi, options: DraftTokensOptions = {}) {
    const debounceMs = options.debounceMs ?? 300;
    const state = $state({
        /** The latest count, and the conversation and text it is for; `null` for nothing counted (no model, an empty message). */
        count: null as TokenCount | null,
        countedText: "",
        countedConversationId: null as string | null
    });
    let seq = 0;
    let timer: ReturnType<typeof setTimeout> | null = null;
    // What the composer shows now: counts of other conversations never speak for this one.
    const shown = $state({conversationId: null as string | null, text: ""});

    const hint = $derived(state.countedConversationId === shown.conversationId ? draftBudgetHint(state.count) : null);

    function cancel(): void {
        if (timer != null) clearTimeout(timer);
        timer = null;
        seq++;
    }

    async function count(conversationId: string | null, text: string, mine: number): Promise<void> {
        const result = await request(bridge, "chat:countTokens", conversationId != null ? {conversationId, text} : {text});
        if (mine !== seq) return;
        // A refusal (the text too long to count, the conversation gone) says nothing here: sending says why, if it fails.
        state.count = result.ok ? result.value : null;
        state.countedText = text;
        state.countedConversationId = conversationId;
    }

    /**
     * The composer's text changed (or its conversation, that conversation's settings or messages, the model): counts it
     * after `debounceMs` of quiet, cancelling the count asked for before; forgets the count for an empty message.
     */
    function update(conversationId: string | null, text: string): void {
        shown.conversationId = conversationId;
        shown.text = text;
        cancel();
        if (text.trim() === "") {
            state.count = null;
            state.countedText = "";
            return;
        }
        const mine = seq;
        timer = setTimeout(() => {
            timer = null;
            void count(conversationId, text, mine);
        }, debounceMs);
    }

    return {
        state,
        /** What to say under the input about the message and the budget; `null` when nothing. */
        get hint() {
            return hint;
        },
        /**
         * Whether sending is refused: Full KV's budget cannot hold the message. Only while the count is for this text, or
         * for the start of it (a longer text cannot fit better): after a deletion, the count waits for the next answer.
         */
        get blocked() {
            return hint?.kind === "block" && shown.text.startsWith(state.countedText);
        },
        update,
        dispose(): void {
            cancel();
        }
    };
}
