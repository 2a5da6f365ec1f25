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
    });

    test("no match: another shape, another architecture, a shape not known", () => {
        expect(matchTrimkvReleases({...qwen3(28, 2048, 16, "Qwen3 1.7B"), architecture: "llama"})).toEqual({releases: [], why: null});
        expect(matchTrimkvReleases({...qwen3(28, 2048, 16, "Qwen3 1.7B"), headCountKv: 4})).toEqual({releases: [], why: null});
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
        ).toEqual({releases: [], why: null});
        // The tiny test model that Ponder's fixtures use.
        expect(
            repos({
                architecture: "qwen3",
                layers: 4,
                embeddingLength: 160,
                headCount: 4,
                headCountKv: 2,
                name: "tiny-qwen3",
                path: "t.gguf"
            })
        ).toEqual([]);
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

    test("the catalogue: six rg releases, each repo once, budgets as the authors trained", () => {
        expect(trimkvReleases.map((release) => [release.repo.split("/")[1], release.memorySize])).toEqual([
            ["TrimKV-Qwen3-1.7B-Math", 512],
            ["TrimKV-Qwen3-4B-Math", 512],
            ["TrimKV-Qwen3-8B-Math", 512],
            ["TrimKV-Qwen3-14B-Math", 512],
            ["TrimKV-Qwen3-4B-Instruct-2507", 4096],
            ["TrimKV-Phi-3-mini-128k-instruct", 2048]
        ]);
        expect(trimkvReleases.some((release) => release.repo.includes("DBTrimKV"))).toBe(false);
    });
});
