import {describe, expect, test} from "vitest";
import {describeBuild} from "../../../renderer/lib/describeBuild.js";
import {decodeRate, formatLatency, formatSeconds, formatTokens, promptRate, tokensPerSecond} from "../../../renderer/lib/format.js";

describe("display formatting", () => {
    test("the build says which backend runs and whether it is Ponder's patched engine", () => {
        expect(describeBuild({kind: "local", gpu: false, patched: true, llamaCppRelease: "b1", seriesHash: "h"})).toEqual({
            label: "CPU (patched)",
            device: null,
            warning: false,
            note: null
        });
        expect(
            describeBuild({
                kind: "local",
                gpu: "cuda",
                patched: true,
                llamaCppRelease: "b1",
                seriesHash: "h",
                requested: "auto",
                fallback: null
            }).label
        ).toBe("CUDA (patched)");
        expect(describeBuild({kind: "local", gpu: "metal", patched: true, llamaCppRelease: "b1", seriesHash: "h"}).label).toBe(
            "Metal (patched)"
        );
        expect(describeBuild({kind: "prebuilt", gpu: "vulkan", patched: false, llamaCppRelease: "b1", seriesHash: null})).toEqual({
            label: "Vulkan (unpatched prebuilt)",
            device: null,
            warning: true,
            note: null
        });
        expect(describeBuild({kind: "local", gpu: false, patched: false, llamaCppRelease: "b1", seriesHash: null}).label).toBe(
            "CPU (unpatched)"
        );
        expect(describeBuild(null).warning).toBe(true);
    });

    test("a build running instead of the one chosen is a warning, with the reason", () => {
        const fallback =
            "The CUDA build could not be loaded (libcuda.so.1: cannot open shared object file): running the CPU build instead.";
        expect(
            describeBuild({kind: "local", gpu: false, patched: true, llamaCppRelease: "b1", seriesHash: "h", requested: "cuda", fallback})
        ).toEqual({label: "CPU (patched)", device: null, warning: true, note: fallback});
        const unpatched =
            "No patched llama.cpp build is present (run npm run build:native). Running unpatched: Full KV only, compression is off.";
        expect(
            describeBuild({
                kind: "prebuilt",
                gpu: false,
                patched: false,
                llamaCppRelease: "b1",
                seriesHash: null,
                requested: "auto",
                fallback: unpatched
            })
        ).toEqual({label: "CPU (unpatched prebuilt)", device: null, warning: true, note: unpatched});
    });

    test("a GPU build names the device it runs on; one that found no device says that every layer runs on the CPU", () => {
        const vulkan = {
            kind: "local",
            gpu: "vulkan",
            patched: true,
            llamaCppRelease: "b1",
            seriesHash: "h",
            requested: "vulkan",
            fallback: null
        } as const;
        expect(describeBuild({...vulkan, devices: [{name: "Vulkan0", description: "llvmpipe (LLVM 15.0.6, 256 bits)"}]})).toEqual({
            label: "Vulkan (patched)",
            device: "llvmpipe (LLVM 15.0.6, 256 bits)",
            warning: false,
            note: null
        });
        expect(
            describeBuild({
                ...vulkan,
                gpu: "cuda",
                devices: [
                    {name: "CUDA0", description: "NVIDIA A"},
                    {name: "CUDA1", description: "NVIDIA B"}
                ]
            }).device
        ).toBe("NVIDIA A, NVIDIA B");
        expect(describeBuild({...vulkan, devices: []})).toEqual({
            label: "Vulkan (patched)",
            device: null,
            warning: true,
            note: "The Vulkan build found no Vulkan device on this machine: every layer runs on the CPU."
        });
        // A CPU build has no device to name, whatever the list says; the reason a build runs instead of another comes first.
        expect(describeBuild({...vulkan, gpu: false, devices: []})).toEqual({
            label: "CPU (patched)",
            device: null,
            warning: false,
            note: null
        });
        expect(describeBuild({...vulkan, devices: [], fallback: "No CUDA build is present: running the Vulkan build instead."}).note).toBe(
            "No CUDA build is present: running the Vulkan build instead."
        );
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
