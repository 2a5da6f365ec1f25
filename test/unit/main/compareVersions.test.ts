import {describe, expect, it} from "vitest";
import {compareVersions} from "../../../main/services/compareVersions.js";

describe("where two versions of an answer part", () => {
    it("says they are the same when thought and answer match", () => {
        expect(compareVersions({thinking: "a b", text: "4"}, {thinking: "a b", text: "4"})).toEqual({
            sameThought: true,
            sameAnswer: true,
            parting: null
        });
    });

    it("finds the first word where the thoughts part, on both sides", () => {
        const result = compareVersions({thinking: "Add 3 and 4 to get 7, so", text: "7"}, {thinking: "Add 3 and 45 then", text: "48"});
        expect(result.sameThought).toBe(false);
        expect(result.sameAnswer).toBe(false);
        expect(result.parting).toEqual({
            segment: "thought",
            at: 10,
            before: "Add 3 and ",
            pruned: {word: "4", rest: " to get 7, so"},
            full: {word: "45", rest: " then"}
        });
    });

    it("looks at the answer when the thoughts match, and handles one text ending first", () => {
        const result = compareVersions({thinking: "t", text: "The sum is 7"}, {thinking: "t", text: "The sum is 7."});
        expect(result.parting).toEqual({
            segment: "answer",
            at: 11,
            before: "The sum is ",
            pruned: {word: "7", rest: ""},
            full: {word: "7.", rest: ""}
        });
        expect(compareVersions({thinking: "x", text: ""}, {thinking: "x y", text: ""}).parting).toEqual({
            segment: "thought",
            at: 0,
            before: "",
            pruned: {word: "x", rest: ""},
            full: {word: "x", rest: " y"}
        });
    });
});
