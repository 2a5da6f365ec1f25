import {describe, expect, it} from "vitest";
import {readReason} from "../../../main/engine/generation/readReason.js";

describe("why a prompt is read (the progress's wording)", () => {
    it("says nothing for a short first message, and calls a long one a message", () => {
        // A new conversation: no earlier turns, whatever the context was.
        expect(readReason({earlierTokens: 0, newContext: false, reused: 0, missing: 300})).toBeNull();
        expect(readReason({earlierTokens: 0, newContext: true, reused: 0, missing: 300})).toBeNull();
        expect(readReason({earlierTokens: 0, newContext: true, reused: 0, missing: 5000})).toBe("message");
    });

    it("calls a read of earlier turns a rebuild for new settings only in a context made anew", () => {
        expect(readReason({earlierTokens: 3000, newContext: true, reused: 0, missing: 3100})).toBe("settings");
        // Another conversation, a model just loaded, a pruned prompt read afresh: the same context, the history again.
        expect(readReason({earlierTokens: 3000, newContext: false, reused: 0, missing: 3100})).toBe("conversation");
        // A state loaded in the new context spared the history: only the message is read.
        expect(readReason({earlierTokens: 3000, newContext: true, reused: 3000, missing: 2500})).toBe("message");
    });

    it("calls it a message when the earlier turns were in place", () => {
        expect(readReason({earlierTokens: 3000, newContext: false, reused: 2990, missing: 400})).toBeNull();
        expect(readReason({earlierTokens: 3000, newContext: false, reused: 2990, missing: 4000})).toBe("message");
    });
});
