import type {Token} from "node-llama-cpp";
import {describe, expect, it} from "vitest";
import {gatesPass, thoughtEnd} from "../../../../main/engine/calibration/validateCandidates.js";
import type {ValidationPoint} from "../../../../main/engine/calibration/types.js";

describe("gatesPass", () => {
    // 1,000 tokens teacher-forced, 10 of them answers
    const point = (share: number, gates: number, lethe: number, answers: ValidationPoint["answers"]): ValidationPoint => ({
        share,
        gates,
        lethe,
        answers
    });

    it("passes gates that keep the answers right though Lethe agrees on more of the thought's tokens", () => {
        // Lethe 0.998 over every token with 3 of 10 answer tokens; the gates 0.95 with 10 of 10
        const points = [point(0.25, 0.9, 0.95, {gates: 0.9, lethe: 0.2}), point(0.5, 0.95, 0.998, {gates: 1, lethe: 0.3})];
        expect(gatesPass(points, 1000, 10)).toBe(true);
        // without answers measured, the same agreement over every token refuses them
        expect(
            gatesPass(
                points.map((p) => ({...p, answers: null})),
                1000,
                0
            )
        ).toBe(false);
    });

    it("refuses gates that lose the thought even with the answers as right as Lethe's", () => {
        const points = [point(0.5, 0.6, 0.99, {gates: 0.9, lethe: 0.9})];
        expect(gatesPass(points, 1000, 10)).toBe(false);
    });

    it("weighs the thought and the answers alike: a thought lost costs what an answer lost costs", () => {
        // thought agreement: gates (0.8 * 1000 - 1 * 100) / 900 = 0.778, Lethe (0.9 * 1000 - 0.5 * 100) / 900 = 0.944
        const points = [point(0.5, 0.8, 0.9, {gates: 1, lethe: 0.5})];
        expect(gatesPass(points, 1000, 100)).toBe(true); // 0.889 against 0.722
        // Lethe's thought (0.9 * 1000 - 0.9 * 100) / 900 = 0.9 and answers 0.9 against the gates' 0.778 and 1
        const closer = [point(0.5, 0.8, 0.9, {gates: 1, lethe: 0.9})];
        expect(gatesPass(closer, 1000, 100)).toBe(false); // 0.889 against 0.9
    });
});

describe("thoughtEnd", () => {
    // one character per token
    const model = {detokenize: (tokens: readonly Token[]) => String.fromCharCode(...(tokens as readonly number[]))};
    const tokens = (text: string) => Array.from(text, (c) => c.charCodeAt(0) as Token);

    it("finds the first token after the closing marker", () => {
        expect(thoughtEnd(model, tokens("ab</think>42"), "</think>")).toBe(10);
        expect(thoughtEnd(model, tokens("</think>"), "</think>")).toBe(8);
    });

    it("counts every token as thought when the marker never comes, and none when the template has no thought", () => {
        expect(thoughtEnd(model, tokens("ab</thin"), "</think>")).toBe(8);
        expect(thoughtEnd(model, tokens("ab"), null)).toBe(0);
    });
});
