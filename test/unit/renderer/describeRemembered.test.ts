import {describe, expect, it} from "vitest";
import type {PruneRound, TokenScores} from "../../../preload/contract.js";
import {
    describeLayers,
    describeRemembered,
    describeRememberedToken,
    describeTokenScore,
    inRanges
} from "../../../renderer/lib/describeRemembered.js";
import {describeRound, rememberedAtRound} from "../../../renderer/lib/rememberedAtRound.js";
import type {RememberedView} from "../../../renderer/state/memory.svelte.js";

const view: RememberedView = {
    messageId: "m",
    tokensSeen: 640,
    answerStart: 140,
    evicted: [10, 30, 200, 500],
    live: false,
    policy: "lethe",
    scores: null,
    rounds: []
};

/** A record of positions 100..149 by rounds 2 and 3: layers 0 and 2 keep the even ones, layers 0, 1, 4 and 5 keep 120. */
const scores: TokenScores = {
    kind: "attention",
    layers: 6,
    positions: Array.from({length: 50}, (_, i) => 100 + i),
    scores: Array.from({length: 50}, (_, i) => (i === 20 ? 0.0123 : 0.5)),
    rounds: Array.from({length: 50}, (_, i) => (i < 10 ? 2 : 3)),
    keptBy: Array.from({length: 50}, (_, i) => (i === 20 ? "33" : i % 2 === 0 ? "50" : "0"))
};
const rounds: PruneRound[] = [
    {first: 1, last: 1, step: 0, tokensSeen: 150, evicted: [10, 20]},
    {first: 2, last: 3, step: 64, tokensSeen: 214, evicted: [20, 30, 200, 300]},
    {first: 4, last: 4, step: 128, tokensSeen: 278, evicted: [300, 500]}
];

describe("what the model still remembers, in words", () => {
    it("finds a position in the evicted ranges", () => {
        expect([9, 10, 29, 30, 199, 200, 499, 500].map((position) => inRanges(view.evicted, position))).toEqual([
            false,
            true,
            true,
            false,
            false,
            true,
            true,
            false
        ]);
    });

    it("says of a token where it is, its age and whether it is still in memory", () => {
        expect(describeRememberedToken(view, 0)).toBe("Token 1 of 640, in the prompt · 639 tokens old · still in memory");
        expect(describeRememberedToken(view, 250)).toBe(
            "Token 251 of 640, in the answer · 389 tokens old · forgotten (evicted from memory)"
        );
        expect(describeRememberedToken(view, 638)).toBe("Token 639 of 640, in the answer · 1 token old · still in memory");
    });

    it("counts what is kept of the prompt and of the answer", () => {
        expect(describeRemembered(view)).toBe("Remembers 320 of 640 tokens: 120 of the prompt's 140, 200 of the answer's 500.");
    });

    it("names layers as runs", () => {
        expect(describeLayers([0, 1, 2, 3, 5, 7, 8])).toBe("0–3, 5, 7, 8");
        expect(describeLayers([])).toBe("");
    });

    it("says of a token its score under the policy, the round that scored it and which layers' own ranking kept it", () => {
        const scored = {...view, scores, rounds};
        // "33": layers 0 and 1 (the first digit, layers 0-3), 4 and 5 (the second, layers 4-7).
        expect(describeTokenScore(scored, 120)).toBe(
            "Lethe's score (attention received) 0.0123 at round 3 of 4 · layers whose own ranking would keep it: 0, 1, 4, 5 (4 of 6)"
        );
        expect(describeTokenScore(scored, 102)).toBe(
            "Lethe's score (attention received) 0.5 at round 2 of 4 · layers whose own ranking would keep it: 0, 2 (2 of 6)"
        );
        expect(describeTokenScore(scored, 101)).toBe(
            "Lethe's score (attention received) 0.5 at round 2 of 4 · layers whose own ranking would keep it: none"
        );
        expect(
            describeTokenScore(
                {...scored, policy: "trimkv", scores: {...scores, kind: "retention", keptBy: scores.keptBy.map(() => "33")}},
                130
            )
        ).toBe("TRIM-KV retention 0.5 at round 3 of 4 · layers whose own ranking would keep it: 0, 1, 4, 5 (4 of 6)");
        expect(
            describeTokenScore(
                {...scored, policy: "trimkv", scores: {...scores, kind: "heads", keptBy: scores.keptBy.map(() => "33")}},
                130
            )
        ).toBe("Held by 50% of the layers' KV heads at round 3 of 4 (per-head cells) · layers where a head holds it: 0, 1, 4, 5 (4 of 6)");
        expect(
            describeTokenScore(
                {
                    ...scored,
                    policy: "streamingllm",
                    scores: {...scores, kind: "none", scores: scores.scores.map(() => null), keptBy: scores.keptBy.map(() => "f3")}
                },
                130
            )
        ).toBe(
            "StreamingLLM keeps by position, not by a score (last seen at round 3 of 4) · layers whose own ranking would keep it: all 6"
        );
    });

    it("says why a token has no score rather than make one up", () => {
        const scored = {...view, scores, rounds};
        expect(describeTokenScore(scored, 200)).toBe("Not scored yet: written after the last prune round.");
        expect(describeTokenScore(scored, 50)).toBe("No prune round of this answer saw it (an earlier answer had already evicted it).");
        expect(describeTokenScore(view, 50)).toBe(
            "This answer recorded no token scores (no prune round ran, or it was made before they were recorded)."
        );
        expect(describeTokenScore({...view, live: true}, 50)).toBe("No prune round has run yet in this answer.");
        expect(describeTokenScore({...view, policy: "full"}, 50)).toBe("Full KV keeps every token: no prune round scores them.");
        const full = {...scores, positions: Array.from({length: 4096}, (_, i) => 1000 + i)};
        expect(describeTokenScore({...view, scores: full}, 999)).toBe(
            "No score kept: an answer keeps the scores of its newest 4,096 tokens."
        );
    });

    it("shows the strip as it stood after a round: the tokens written by then, what the rounds had evicted by then", () => {
        const scored = {...view, rounds};
        expect(rememberedAtRound(scored, 0)).toMatchObject({tokensSeen: 150, evicted: [10, 20]});
        expect(rememberedAtRound(scored, 1)).toMatchObject({tokensSeen: 214, evicted: [10, 30, 200, 300]});
        expect(rememberedAtRound(scored, 3)).toBe(scored);
        expect(describeRound(scored, 0)).toBe("After round 1 of 4, 0 tokens into the answer");
        expect(describeRound(scored, 1)).toBe("After rounds 2–3 of 4, 64 tokens into the answer");
        expect(describeRound(scored, 3)).toBe("At the end of the answer, after all 4 prune rounds");
    });
});
