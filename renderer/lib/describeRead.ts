import type {ReadReason} from "../../preload/contract.js";

/**
 * What the progress line says while a prompt is read into the context, by why it is read (`ReadReason`), and once it
 * is done: `"Reading your message… 40%"`, `"Rebuilding the context for the new settings… 40%"`.
 */
export function describeRead(reason: ReadReason, percent: number): string {
    const done = percent >= 100;
    switch (reason) {
        case "message":
            return done ? "Message read" : `Reading your message… ${percent}%`;
        case "conversation":
            return done ? "Conversation read into the context" : `Reading the conversation into the context… ${percent}%`;
        case "settings":
            return done
                ? "Context rebuilt for the new compression settings"
                : `Rebuilding the context for the new compression settings… ${percent}%`;
    }
}
