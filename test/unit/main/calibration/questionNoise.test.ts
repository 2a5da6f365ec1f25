// A model's own questions are checked before it thinks on them: a draw that is mostly one or two words, or text
// looping, is noise; and a refused calibration says what to try next, by what its gates were made from.
import {describe, expect, it} from "vitest";
import {nextTry} from "../../../../main/engine/calibration/calibrateRetention.js";
import {questionNoise} from "../../../../main/engine/calibration/ownPrompts.js";

describe("questionNoise", () => {
    it("reads questions in words, programs and lists as questions", () => {
        expect(
            questionNoise([
                "What is 17 times 23? Show your steps.",
                "a=05,12,19,33\nb=02,21,30\nk=04?",
                "k=7,a=3,q=5\nYZ=k+a\nZA=YZ+q\nZZ=YZ+a\nZZ?",
                "Reverse this list: 37, 12, 85, 40"
            ])
        ).toBeNull();
    });

    it("calls a draw of single words or loops noise, and says how many", () => {
        const loop = "the the the the the the the the the the the the the the the the the the";
        expect(questionNoise(["hello", "yes", loop, "What is 2 + 3 and why?"])).toBe(
            "3 of the 4 questions it wrote are one or two words, or the same text looping"
        );
        expect(questionNoise(["ab=ab=ab=ab=ab=ab=ab=ab=ab=ab=ab=ab=ab=ab=ab=ab"])).toMatch(/^1 of the 1 questions/);
        expect(questionNoise([])).toBe("no questions");
    });

    it("tolerates a few noisy questions among real ones", () => {
        expect(questionNoise(["ok", "What is 2 + 3 and why?", "Sum the list 1, 2, 3 for me."])).toBeNull();
    });
});

describe("nextTry", () => {
    it("points a refused calibration on a model's own or English questions to conversations and a prompts file", () => {
        expect(nextTry("own")).toMatch(/conversations/);
        expect(nextTry("own")).toMatch(/prompts file/);
        expect(nextTry("english")).toMatch(/conversations/);
        expect(nextTry("traces")).toMatch(/longer/);
    });
});
