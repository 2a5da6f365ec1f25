import {describe, expect, it} from "vitest";
import {describeRemembered, describeRememberedToken, inRanges} from "../../../renderer/lib/describeRemembered.js";

const view = {messageId: "m", tokensSeen: 640, answerStart: 140, evicted: [10, 30, 200, 500], live: false};

describe("what the model still remembers, in words", () => {
    it("finds a position in the evicted ranges", () => {
        expect([9, 10, 29, 30, 199, 200, 499, 500].map((position) => inRanges(view.evicted, position)))
            .toEqual([false, true, true, false, false, true, true, false]);
    });

    it("says of a token where it is, its age and whether it is still in memory", () => {
        expect(describeRememberedToken(view, 0)).toBe("Token 1 of 640, in the prompt · 639 tokens old · still in memory");
        expect(describeRememberedToken(view, 250)).toBe("Token 251 of 640, in the answer · 389 tokens old · forgotten (evicted from memory)");
        expect(describeRememberedToken(view, 638)).toBe("Token 639 of 640, in the answer · 1 token old · still in memory");
    });

    it("counts what is kept of the prompt and of the answer", () => {
        expect(describeRemembered(view)).toBe("Remembers 320 of 640 tokens: 120 of the prompt's 140, 200 of the answer's 500.");
    });
});
