import {describe, expect, it} from "vitest";
import {thoughtSpans} from "../../../renderer/lib/thoughtSpans.js";

describe("a thought cut into what is remembered and what was forgotten", () => {
    it("fades a chunk whose every position was evicted, and merges neighbours alike", () => {
        // Four one-token chunks "ab", "cd", "ef", "gh" at positions 10..13; 11 and 12 evicted, then an unrecorded tail.
        const spans = thoughtSpans("abcdefgh!", [1, 2, 2, 4, 3, 6, 4, 8], 10, [11, 13]);
        expect(spans).toEqual([
            {text: "ab", forgotten: false},
            {text: "cdef", forgotten: true},
            {text: "gh!", forgotten: false}
        ]);
    });

    it("keeps a chunk of several tokens unless all of them were evicted", () => {
        expect(thoughtSpans("abcd", [2, 2, 4, 4], 0, [0, 1, 2, 4])).toEqual([
            {text: "ab", forgotten: false},
            {text: "cd", forgotten: true}
        ]);
        expect(thoughtSpans("abc", [], 0, [0, 5])).toEqual([{text: "abc", forgotten: false}]);
    });
});
