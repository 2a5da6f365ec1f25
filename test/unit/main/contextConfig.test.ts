import {describe, expect, it} from "vitest";
import type {CompressionSettings} from "../../../preload/contract/compression.js";
import type {PolicyId} from "../../../preload/policyCatalogue.js";
import {contextConfig} from "../../../main/engine/generation/generateAnswer.js";
import {defaultCompressionSettings} from "../../../main/services/schemas.js";

const under = (policy: PolicyId): CompressionSettings => ({...defaultCompressionSettings, policy});

describe("the chat context a generation asks for", () => {
    it("is shared by every policy on a CPU build: the read-outs are not part of it", () => {
        const keys = new Set(
            (["full", "streamingllm", "h2o", "lethe", "trimkv", "lava"] as const).map((policy) =>
                JSON.stringify(contextConfig(512, under(policy), false))
            )
        );
        expect(keys.size).toBe(1);
    });

    it("differs on a GPU or RPC build between policies that turn other read-outs on (scores, gates, value norms)", () => {
        const reads = (policy: PolicyId) => contextConfig(512, under(policy), true).reads;
        const distinct = new Set((["full", "streamingllm", "h2o", "trimkv", "lava"] as const).map(reads));
        expect(distinct.size).toBe(5);
        // The same policy asks for the same context again.
        expect(reads("h2o")).toBe(reads("h2o"));
    });
});
