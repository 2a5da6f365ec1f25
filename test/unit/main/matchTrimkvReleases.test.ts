import {describe, expect, test} from "vitest";
import {matchTrimkvReleases, type ReleaseMatchInput} from "../../../main/engine/retention/matchTrimkvReleases.js";
import {trimkvReleases} from "../../../main/engine/retention/trimkvReleases.js";

const qwen3 = (layers: number, embeddingLength: number, headCount: number, name: string, file = `${name}.gguf`): ReleaseMatchInput => ({
    architecture: "qwen3",
    layers,
    embeddingLength,
    headCount,
    headCountKv: 8,
    name,
    path: `/models/${file}`
});
const repos = (input: ReleaseMatchInput) => matchTrimkvReleases(input).releases.map((release) => release.repo);
const llama8b = (name: string, file = `${name}.gguf`): ReleaseMatchInput => ({
    architecture: "llama",
    layers: 32,
    embeddingLength: 4096,
    headCount: 32,
    headCountKv: 8,
    name,
    path: `/models/${file}`
});

describe("the authors' released TRIM-KV gates matched to a model's GGUF metadata", () => {
    test("each base model's shape and name find its release, and only it", () => {
        expect(repos(qwen3(28, 2048, 16, "Qwen3 1.7B"))).toEqual(["ngocbh/TrimKV-Qwen3-1.7B-Math"]);
        expect(repos(qwen3(36, 4096, 32, "Qwen3-8B"))).toEqual(["ngocbh/TrimKV-Qwen3-8B-Math"]);
        expect(repos(qwen3(40, 5120, 40, "Qwen3 14B"))).toEqual(["ngocbh/TrimKV-Qwen3-14B-Math"]);
        const phi = {
            architecture: "phi3",
            layers: 32,
            embeddingLength: 3072,
            headCount: 32,
            headCountKv: 32,
            name: "Phi 3 Mini 128k Instruct",
            path: "/m/phi.gguf"
        };
        expect(matchTrimkvReleases(phi)).toEqual({
            releases: [trimkvReleases.find((r) => r.repo === "ngocbh/TrimKV-Phi-3-mini-128k-instruct")],
            why: null
        });
        expect(matchTrimkvReleases(qwen3(28, 2048, 16, "Qwen3 1.7B")).releases[0]!.memorySize).toBe(512);
        expect(matchTrimkvReleases(llama8b("DeepSeek R1 Distill Llama 8B", "DeepSeek-R1-Distill-Llama-8B-Q4_K_M.gguf"))).toEqual({
            releases: [trimkvReleases.find((r) => r.repo === "ngocbh/TrimKV-DeepSeek-R1-Distill-Llama-8B")],
            why: null
        });
    });

    test("no match: no release, and the nearest one with each part of its shape that differs, in words", () => {
        // another architecture: the nearest of the same architecture, then the fewest parts that differ
        expect(matchTrimkvReleases({...qwen3(28, 2048, 16, "Qwen3 1.7B"), architecture: "llama"})).toEqual({
            releases: [],
            why:
                "No TRIM-KV gates were released for a model of this shape. The nearest release, " +
                "ngocbh/TrimKV-DeepSeek-R1-Distill-Llama-8B (for DeepSeek-R1-Distill-Llama-8B), differs in layers (32, this model 28), " +
                "width (4096, this model 2048) and heads (32, this model 16)."
        });
        // one part off: that part alone
        expect(matchTrimkvReleases({...qwen3(28, 2048, 16, "Qwen3 1.7B"), headCountKv: 4})).toEqual({
            releases: [],
            why:
                "No TRIM-KV gates were released for a model of this shape. The nearest release, ngocbh/TrimKV-Qwen3-1.7B-Math " +
                "(for Qwen3-1.7B), differs in KV heads (8, this model 4)."
        });
        expect(
            matchTrimkvReleases({
                architecture: null,
                layers: null,
                embeddingLength: null,
                headCount: null,
                headCountKv: null,
                name: "tiny",
                path: "tiny.gguf"
            })
        ).toEqual({
            releases: [],
            why: expect.stringMatching(/differs in architecture \(qwen3, this model does not say\), layers \(28, this model does not say\)/)
        });
        // The tiny test model that Ponder's fixtures use.
        expect(
            matchTrimkvReleases({
                architecture: "qwen3",
                layers: 4,
                embeddingLength: 160,
                headCount: 4,
                headCountKv: 2,
                name: "tiny-qwen3",
                path: "t.gguf"
            })
        ).toEqual({
            releases: [],
            why:
                "No TRIM-KV gates were released for a model of this shape. The nearest release, ngocbh/TrimKV-Qwen3-1.7B-Math " +
                "(for Qwen3-1.7B), differs in layers (28, this model 4), width (2048, this model 160), heads (16, this model 4) " +
                "and KV heads (8, this model 2)."
        });
    });

    test("a name that names the base model with more besides (another fine-tune of it) is offered the gates, with that said", () => {
        const r1 = matchTrimkvReleases(qwen3(36, 4096, 32, "DeepSeek R1 0528 Qwen3 8B", "DeepSeek-R1-0528-Qwen3-8B-Q4_K_M.gguf"));
        expect(r1).toEqual({
            releases: [trimkvReleases.find((r) => r.repo === "ngocbh/TrimKV-Qwen3-8B-Math")],
            why:
                'Its name ("DeepSeek R1 0528 Qwen3 8B") names Qwen3-8B with more besides ("deepseek r1 0528"): it may be a ' +
                "fine-tune of Qwen3-8B, and the gates were trained on Qwen3-8B itself, so they may not suit it."
        });
        // either name says it: a bare general.name does not hide what the file name says
        const abliterated = matchTrimkvReleases(qwen3(36, 4096, 32, "Qwen3 8B", "Qwen3-8B-abliterated-Q4_K_M.gguf"));
        expect(abliterated.releases.map((release) => release.repo)).toEqual(["ngocbh/TrimKV-Qwen3-8B-Math"]);
        expect(abliterated.why).toMatch(
            /^Its name \("Qwen3-8B-abliterated-Q4_K_M\.gguf"\) names Qwen3-8B with more besides \("abliterated"\)/
        );
        expect(matchTrimkvReleases(llama8b("DeepSeek R1 Distill Llama 8B Uncensored")).why).toMatch(
            /names DeepSeek-R1-Distill-Llama-8B with more besides \("uncensored"\): it may be a fine-tune/
        );
        // quantization tags, split-file counters and the publisher's name are not another model
        for (const file of [
            "Qwen_Qwen3-8B-UD-Q4_K_XL-00001-of-00002.gguf",
            "Qwen3-8B-IQ4_XS.gguf",
            "Qwen3-8B-BF16.gguf",
            "qwen3-8b-q8_0.gguf"
        ])
            expect(matchTrimkvReleases(qwen3(36, 4096, 32, "Qwen3 8B", file)), file).toEqual({
                releases: [trimkvReleases.find((r) => r.repo === "ngocbh/TrimKV-Qwen3-8B-Math")],
                why: null
            });
    });

    test("DeepSeek-R1-Distill-Llama-8B's shape is Llama-3.1-8B's: another name of that shape is offered its gates with a warning", () => {
        const match = matchTrimkvReleases(llama8b("Meta Llama 3.1 8B Instruct"));
        expect(match.releases.map((release) => release.repo)).toEqual(["ngocbh/TrimKV-DeepSeek-R1-Distill-Llama-8B"]);
        expect(match.why).toMatch(/shape of DeepSeek-R1-Distill-Llama-8B, but its name \("Meta Llama 3\.1 8B Instruct"\) does not say/);
    });

    test("Qwen3-4B and Qwen3-4B-Instruct-2507 share a shape: the name picks one, or both are offered with the reason", () => {
        expect(repos(qwen3(36, 2560, 32, "Qwen3 4B Instruct 2507"))).toEqual(["ngocbh/TrimKV-Qwen3-4B-Instruct-2507"]);
        expect(repos(qwen3(36, 2560, 32, "Qwen3 4B"))).toEqual(["ngocbh/TrimKV-Qwen3-4B-Math"]);
        // The file name speaks when general.name is bare.
        expect(repos(qwen3(36, 2560, 32, "model", "Qwen3-4B-Instruct-2507-Q4_K_M.gguf"))).toEqual(["ngocbh/TrimKV-Qwen3-4B-Instruct-2507"]);
        // "4b" is a word: Qwen3-14B's name does not pick Qwen3-4B.
        const thinking = matchTrimkvReleases(qwen3(36, 2560, 32, "Qwen3 4B Thinking 2507"));
        expect(thinking.releases.map((release) => release.repo)).toEqual([
            "ngocbh/TrimKV-Qwen3-4B-Math",
            "ngocbh/TrimKV-Qwen3-4B-Instruct-2507"
        ]);
        expect(thinking.why).toBe(
            'Qwen3-4B and Qwen3-4B-Instruct-2507 have this model\'s shape, and its name ("Qwen3 4B Thinking 2507") does not say ' +
                "which it is: take the gates of the model it was made from."
        );
        expect(matchTrimkvReleases(qwen3(36, 2560, 32, "my-finetune")).releases).toHaveLength(2);
    });

    test("a lone release whose base model the name does not name is offered with a warning", () => {
        const phi4k = {
            architecture: "phi3",
            layers: 32,
            embeddingLength: 3072,
            headCount: 32,
            headCountKv: 32,
            name: "Phi 3 Mini 4k Instruct",
            path: "/m/phi-4k.gguf"
        };
        const match = matchTrimkvReleases(phi4k);
        expect(match.releases.map((release) => release.repo)).toEqual(["ngocbh/TrimKV-Phi-3-mini-128k-instruct"]);
        expect(match.why).toMatch(/shape of Phi-3-mini-128k-instruct, but its name \("Phi 3 Mini 4k Instruct"\) does not say/);
    });

    test("the catalogue: seven rg releases, each repo once, budgets as the authors trained", () => {
        expect(trimkvReleases.map((release) => [release.repo.split("/")[1], release.memorySize])).toEqual([
            ["TrimKV-Qwen3-1.7B-Math", 512],
            ["TrimKV-Qwen3-4B-Math", 512],
            ["TrimKV-Qwen3-8B-Math", 512],
            ["TrimKV-Qwen3-14B-Math", 512],
            ["TrimKV-Qwen3-4B-Instruct-2507", 4096],
            ["TrimKV-Phi-3-mini-128k-instruct", 2048],
            ["TrimKV-DeepSeek-R1-Distill-Llama-8B", 512]
        ]);
        expect(new Set(trimkvReleases.map((release) => release.repo)).size).toBe(trimkvReleases.length);
        expect(trimkvReleases.find((release) => release.repo === "ngocbh/TrimKV-DeepSeek-R1-Distill-Llama-8B")).toMatchObject({
            baseModel: "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
            architecture: "llama",
            layers: 32,
            embeddingLength: 4096,
            headCount: 32,
            headCountKv: 8
        });
        expect(trimkvReleases.some((release) => release.repo.includes("DBTrimKV"))).toBe(false);
    });
});
