import type {CompressionSettings, NewConversationCompression} from "../../preload/contract.js";
import {describeSetting} from "./describeCompression.js";

/**
 * Which conversations a change of the budget controller's draft affects, in words: this one only, with what new ones
 * start with. `draft` is the draft once valid (`null` otherwise), `saved` the saved default for new conversations, and
 * `newConversation` what a conversation created now starts under (the loaded model's retention gates decide it until a
 * default is saved).
 */
export function describeBudgetScope(
    draft: CompressionSettings | null,
    saved: CompressionSettings | null | undefined,
    newConversation: NewConversationCompression | null
): string {
    // With retention gates and no default saved, new conversations start under TRIM-KV, not the default.
    const gates = newConversation?.source === "gates" ? newConversation.compression : null;
    const next = gates ?? saved;
    const same = next != null && draft != null && JSON.stringify(draft) === JSON.stringify(next);
    const start = gates != null ? "New conversations with this model start with" : "New conversations start with";
    const why = gates != null ? " (it has retention gates, and no default was saved)" : " (the saved default)";
    return (
        "Apply changes this conversation only, from its next answer." +
        (next == null
            ? ""
            : same
              ? ` ${start} these settings too${why}.`
              : ` ${start} ${describeSetting(next)}${gates != null ? why : ""}; Save as default to change that.`)
    );
}
