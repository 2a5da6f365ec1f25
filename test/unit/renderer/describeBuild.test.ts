import {describe, expect, test} from "vitest";
import {describeBuild} from "../../../renderer/lib/describeBuild.js";
import {decodeRate, formatLatency, formatSeconds, formatTokens, promptRate, tokensPerSecond} from "../../../renderer/lib/format.js";

describe("display formatting", () => {
    test("the build says whether it is Ponder's patched engine", () => {
        expect(describeBuild({kind: "local", gpu: false, patched: true, llamaCppRelease: "b1", seriesHash: "h"}))
            .toEqual({label: "patched local build · CPU", warning: false});
        expect(describeBuild({kind: "local", gpu: "cuda", patched: true, llamaCppRelease: "b1", seriesHash: "h"}).label)
            .toBe("patched local build · CUDA");
        expect(describeBuild({kind: "prebuilt", gpu: "vulkan", patched: false, llamaCppRelease: "b1", seriesHash: null}))
            .toEqual({label: "prebuilt (unpatched)", warning: true});
        expect(describeBuild(null).warning).toBe(true);
    });

    test("thinking stats read as a person says them", () => {
        expect(`Thinking… ${formatTokens(123)} · ${formatSeconds(4200)}`).toBe("Thinking… 123 tokens · 4.2 s");
        expect(formatTokens(1)).toBe("1 token");
        expect(formatSeconds(125_000)).toBe("2 min 5 s");
    });

    test("tokens per second counts thought and answer tokens over the elapsed time", () => {
        expect(tokensPerSecond({thinkingTokens: 30, answerTokens: 20, totalMs: 2000})).toBe(25);
        expect(tokensPerSecond({thinkingTokens: 0, answerTokens: 0, totalMs: 0})).toBeNull();
        // Decode speed leaves out the wait for the first token; prompt speed is the prompt read in that wait.
        const message = {thinkingTokens: 30, answerTokens: 21, totalMs: 3000, firstTokenMs: 500, promptTokens: 1000};
        expect(decodeRate(message)).toBe(20);
        expect(promptRate(message)).toBe(2000);
        expect(decodeRate({...message, firstTokenMs: null})).toBe(17);
        expect(promptRate({...message, firstTokenMs: null})).toBeNull();
        expect(formatLatency(230.4)).toBe("230 ms");
        expect(formatLatency(1500)).toBe("1.5 s");
    });
});
