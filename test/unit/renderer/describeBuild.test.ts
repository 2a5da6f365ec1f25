import {describe, expect, test} from "vitest";
import {describeBuild} from "../../../renderer/lib/describeBuild.js";
import {decodeRate, formatLatency, formatSeconds, formatTokens, promptRate, tokensPerSecond} from "../../../renderer/lib/format.js";

describe("display formatting", () => {
    test("the build says which backend runs and whether it is Ponder's patched engine", () => {
        expect(describeBuild({kind: "local", gpu: false, patched: true, llamaCppRelease: "b1", seriesHash: "h"}))
            .toEqual({label: "CPU (patched)", warning: false, note: null});
        expect(describeBuild({kind: "local", gpu: "cuda", patched: true, llamaCppRelease: "b1", seriesHash: "h", requested: "auto", fallback: null}).label)
            .toBe("CUDA (patched)");
        expect(describeBuild({kind: "local", gpu: "metal", patched: true, llamaCppRelease: "b1", seriesHash: "h"}).label).toBe("Metal (patched)");
        expect(describeBuild({kind: "prebuilt", gpu: "vulkan", patched: false, llamaCppRelease: "b1", seriesHash: null}))
            .toEqual({label: "Vulkan (unpatched prebuilt)", warning: true, note: null});
        expect(describeBuild({kind: "local", gpu: false, patched: false, llamaCppRelease: "b1", seriesHash: null}).label).toBe("CPU (unpatched)");
        expect(describeBuild(null).warning).toBe(true);
    });

    test("a build running instead of the one chosen is a warning, with the reason", () => {
        const fallback = "The CUDA build could not be loaded (libcuda.so.1: cannot open shared object file): running the CPU build instead.";
        expect(describeBuild({kind: "local", gpu: false, patched: true, llamaCppRelease: "b1", seriesHash: "h", requested: "cuda", fallback}))
            .toEqual({label: "CPU (patched)", warning: true, note: fallback});
        const unpatched = "No patched llama.cpp build is present (run npm run build:native). Running unpatched: Full KV only, compression is off.";
        expect(describeBuild({kind: "prebuilt", gpu: false, patched: false, llamaCppRelease: "b1", seriesHash: null, requested: "auto", fallback: unpatched}))
            .toEqual({label: "CPU (unpatched prebuilt)", warning: true, note: unpatched});
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
