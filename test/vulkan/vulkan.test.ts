// The patched engine built with ggml's Vulkan backend (npm run build:native -- --gpu vulkan), run on whatever Vulkan
// device this machine has; here Mesa's lavapipe, Vulkan on the CPU. Each build runs in an engine process of its own, as
// in the app (two builds' libraries in one process would share ggml's base library). The demo model with every layer
// offloaded, every policy, flash attention on and off, greedy: the Vulkan build's answers against the CPU build's,
// token for token where the two backends' arithmetic agrees, and their live cells and evictions up to where they part.
// A pruned state saved on one build resumes on the other. The status names the Vulkan build and its device. A policy
// switch in a conversation gets a new context on a GPU build (the last test): turning the scores, gates or value norms
// on or off in a context that has decoded corrupted memory on Vulkan (native/README.md, "Vulkan on lavapipe").
// Run with `npm run test:vulkan` (native/README.md, "Vulkan on lavapipe").
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import type {CompressionSettings, KvCacheType, KvSample, PolicyId} from "../../preload/contract.js";
import {EngineProxy} from "../../main/engine/host/EngineProxy.js";
import type {ChatTurn, GenerationChunk, GenerationResult, StateFiles} from "../../main/engine/EngineApi.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {describeBuild} from "../../renderer/lib/describeBuild.js";
import {heldOutDemoProblems} from "../eval/demoTask.js";
import {REPO_ROOT} from "../fixtures/gguf/fixtures.js";
import {spawnTestEngine} from "../engine/spawnTestEngine.js";
import {compareRuns, transcript, type RecordedRun, type RunComparison} from "./compareRuns.js";

// ggml's Vulkan backend leaves out devices of type CPU (lavapipe) unless they are named: name the first device.
process.env.GGML_VK_VISIBLE_DEVICES ??= "0";

const demoModel = path.join(REPO_ROOT, "resources", "models", "ponder-demo.gguf");
const question = heldOutDemoProblems(1, {minSteps: 30, maxSteps: 40})[0]!.question;
const maxTokens = 192;
/** Tokens that the Vulkan build's answers with flash attention agree with the CPU build's at least. */
const flashPrefix = 32;
/** Cells per policy: under the prompt plus the answer for every pruning policy, so that each one evicts. */
const cellsOf = (policy: PolicyId) => (policy === "full" ? 1024 : 160);

/** One generation's settings; `cells` (the policy's budget by default) other than the cases' gives it a context of its own. */
type Case = {policy: PolicyId; flashAttention: boolean; kvType: KvCacheType; kvTypeV: KvCacheType; cells?: number};
const policies: PolicyId[] = ["full", "streamingllm", "h2o", "lethe", "refreekv", "leankv", "lava", "trimkv"];
// LeanKV with K8V4 (q8_0 keys, q4_0 values); quantized values need flash attention, so without it the values stay F16.
const cases: Case[] = policies.flatMap((policy) =>
    [true, false].map(
        (flashAttention) =>
            ({
                policy,
                flashAttention,
                kvType: policy === "leankv" ? "q8_0" : "f16",
                kvTypeV: policy === "leankv" && flashAttention ? "q4_0" : "f16"
            }) satisfies Case
    )
);
const caseName = (c: Case) =>
    `${c.policy}, flash attention ${c.flashAttention ? "on" : "off"}${c.kvType !== "f16" ? `, K ${c.kvType} V ${c.kvTypeV}` : ""}`;

async function record(
    engine: EngineProxy,
    c: Case,
    history: ChatTurn[],
    states?: StateFiles
): Promise<RecordedRun & {result: GenerationResult}> {
    const compression: CompressionSettings = {
        ...defaultCompressionSettings,
        policy: c.policy,
        flashAttention: c.flashAttention,
        kvType: c.kvType,
        kvTypeV: c.kvTypeV,
        pruneEvery: 16
    };
    const chunks: GenerationChunk[] = [];
    const samples: KvSample[] = [];
    const result = await engine.generate({
        history,
        systemPrompt: "",
        temperature: 0,
        seed: 1,
        maxTokens,
        signal: new AbortController().signal,
        kv: {compression, cells: c.cells ?? cellsOf(c.policy)},
        states,
        onChunk: (chunk) => void chunks.push(chunk),
        onSample: (sample) => void samples.push(sample)
    });
    return {chunks, samples, stopReason: result.stopReason, result};
}

/** Where the texts part: a few characters of each run from there, or nothing when they do not. */
function divergenceText(a: RecordedRun, b: RecordedRun, comparison: RunComparison): string {
    if (comparison.firstDivergentChar == null) return "";
    const at = comparison.firstDivergentChar;
    const excerpt = (run: RecordedRun) =>
        JSON.stringify(
            transcript(run)
                .slice(at, at + 16)
                .replaceAll("\u0000", "|")
        );
    return ` (at ${excerpt(a)} / ${excerpt(b)})`;
}

const answerOf = (run: RecordedRun) =>
    run.chunks
        .filter((chunk) => chunk.segment === "answer")
        .map((chunk) => chunk.text)
        .join("");

describe("the Vulkan build against the CPU build", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-vulkan-"));
    const vulkan = new EngineProxy({spawn: spawnTestEngine(), runtime: {build: "vulkan"}});
    const cpu = new EngineProxy({spawn: spawnTestEngine(), runtime: {build: "cpu"}});
    const report: string[] = [];

    beforeAll(async () => {
        const [build] = await Promise.all([vulkan.start(), cpu.start()]);
        if (build.gpu !== "vulkan")
            throw new Error(
                `the Vulkan build does not run (${build.fallback ?? "another build loaded"}); build it with npm run build:native -- --gpu vulkan`
            );
        await Promise.all([vulkan.loadModel(demoModel, null, {gpuLayers: "max"}), cpu.loadModel(demoModel, null)]);
    });
    afterAll(async () => {
        await Promise.all([vulkan.dispose(), cpu.dispose()]);
        fs.rmSync(dir, {recursive: true, force: true});
        console.log(["Vulkan against CPU, greedy, demo model:", ...report].join("\n"));
    });

    it("runs the patched Vulkan build, not a fallback, and the status names it and its device", () => {
        const build = vulkan.status.build!;
        expect(build).toMatchObject({kind: "local", gpu: "vulkan", patched: true, requested: "vulkan", fallback: null});
        expect(build.devices?.length).toBeGreaterThan(0);
        const shown = describeBuild(build);
        expect(shown.label).toBe("Vulkan (patched)");
        expect(shown.device).toBe(build.devices!.map((device) => device.description).join(", "));
        expect(shown.warning).toBe(false);
        report.push(`device: ${build.devices!.map((device) => `${device.name} = ${device.description}`).join(", ")}`);
        expect(describeBuild(cpu.status.build).label).toBe("CPU (patched)");
        expect(describeBuild(cpu.status.build).device).toBeNull();
    });

    it("offloads every layer and the output layer to the Vulkan device", async () => {
        // The placement is known once a context exists.
        await record(vulkan, cases[0]!, [{role: "user", text: "hi"}]);
        const placement = vulkan.status.placement!;
        const device = vulkan.status.build!.devices![0]!.name;
        expect(placement.layers).toHaveLength(vulkan.inspection!.layers!);
        expect(new Set([...placement.layers, placement.output])).toEqual(new Set([device]));
    });

    for (const c of cases) {
        it(`${caseName(c)}: answers as the CPU build does`, async () => {
            const history: ChatTurn[] = [{role: "user", text: question}];
            const [onVulkan, onCpu] = await Promise.all([record(vulkan, c, history), record(cpu, c, history)]);
            const comparison = compareRuns(onVulkan, onCpu);
            const last = (run: RecordedRun) => run.samples.at(-1)!;
            report.push(
                `${caseName(c).padEnd(44)} first divergence ${String(comparison.firstDivergence ?? "none").padStart(4)} of ` +
                    `${comparison.compared}${divergenceText(onVulkan, onCpu, comparison)}; live cells ${last(onVulkan).cellsLive}/${last(onCpu).cellsLive}, evicted ` +
                    `${last(onVulkan).tokensEvicted}/${last(onCpu).tokensEvicted}, prune rounds ${last(onVulkan).pruneRounds}/${last(onCpu).pruneRounds} ` +
                    `(Vulkan/CPU); counters differ at ${comparison.countersDiffer} samples before it`
            );

            // Within the budget, and every token seen is live or evicted, on the Vulkan build as on the CPU.
            for (const sample of onVulkan.samples) expect(sample.cellsLive).toBeLessThanOrEqual(cellsOf(c.policy));
            expect(last(onVulkan).cellsLive + last(onVulkan).tokensEvicted).toBe(last(onVulkan).tokensSeen);
            if (c.policy !== "full") {
                expect(last(onVulkan).pruneRounds).toBeGreaterThan(0);
                expect(last(onVulkan).tokensEvicted).toBeGreaterThan(0);
            }
            // The same cells live and evicted at each sample up to where the answers part. Without flash attention, token for
            // token. With it, ggml-vulkan's and ggml-cpu's kernels sum in another order (measured: LeanKV's q4_0 values part
            // at token 64, LAVa at 128, the others not in 192): the answers agree for a prefix, which a broken kernel or a
            // score read from the wrong cells would not.
            const divergence = "the first token where the Vulkan build's answer parts from the CPU build's";
            if (c.flashAttention)
                expect(comparison.firstDivergence ?? Number.POSITIVE_INFINITY, divergence).toBeGreaterThanOrEqual(flashPrefix);
            else expect(comparison.firstDivergence, divergence).toBeNull();
            expect(comparison.countersDiffer).toBe(0);
            if (comparison.firstDivergence == null) expect(onVulkan.stopReason).toBe(onCpu.stopReason);
        });
    }

    // A pruned state (TRIM-KV: gate logits and scores restored with the cells; LAVa: value norms too) saved on one build
    // and resumed on the other answers the next turn as a resume on its own build does. Each policy on a context of its
    // own (a budget no other test uses): a context that switches policies is the last test's subject.
    for (const [index, policy] of (["h2o", "trimkv", "lava"] as const).entries()) {
        it(`${policy}: a pruned state saved on Vulkan resumes on the CPU build, and one saved on the CPU resumes on Vulkan`, async () => {
            const c: Case = {policy, flashAttention: false, kvType: "f16", kvTypeV: "f16", cells: 176 + 16 * index};
            const files = {vulkan: path.join(dir, `${policy}.vulkan.state`), cpu: path.join(dir, `${policy}.cpu.state`)};
            const first: ChatTurn[] = [{role: "user", text: question}];
            const [turnV, turnC] = await Promise.all([
                record(vulkan, c, first, {load: [], save: files.vulkan}),
                record(cpu, c, first, {load: [], save: files.cpu})
            ]);
            for (const turn of [turnV, turnC]) {
                const saved = turn.result.states!.saved!;
                expect(saved.liveBytes).toBeLessThan(saved.fullBytes);
            }
            // Each state holds the first prompt as read (a pruning policy's state is written while its prompt is read): the
            // next turn continues the CPU build's first answer on all four.
            const history: ChatTurn[] = [
                ...first,
                {role: "assistant", text: answerOf(turnC), thinking: ""},
                {role: "user", text: "And then?"}
            ];
            const onCpuFromVulkan = await record(cpu, c, history, {load: [files.vulkan]});
            const onCpuFromCpu = await record(cpu, c, history, {load: [files.cpu]});
            const onVulkanFromCpu = await record(vulkan, c, history, {load: [files.cpu]});
            const onVulkanFromVulkan = await record(vulkan, c, history, {load: [files.vulkan]});
            const across = [
                [onCpuFromVulkan, onCpuFromCpu, "CPU from Vulkan's state"],
                [onVulkanFromCpu, onVulkanFromVulkan, "Vulkan from the CPU's state"]
            ] as const;
            for (const [resumed, own, label] of across) {
                report.push(
                    `${policy} resumed on ${label}: restored ${resumed.result.states?.restored?.tokens ?? "nothing"} tokens ` +
                        `(${resumed.result.states?.note ?? "no note"}), first divergence from its own build's state ` +
                        `${compareRuns(resumed, own).firstDivergence ?? "none"} of ${compareRuns(resumed, own).compared}`
                );
                expect(resumed.result.states?.restored, label).not.toBeNull();
                expect(resumed.result.states?.restored?.tokens, label).toBe(own.result.states?.restored?.tokens);
                expect(resumed.result.promptTokens, label).toBe(own.result.promptTokens);
                expect(compareRuns(resumed, own).firstDivergence, label).toBeNull();
            }
        });
    }

    // The engine keeps its context while the budget, the cache types and flash attention stay; on a GPU build also while
    // the policy's read-outs (scores, retention gates, value norms, rows scored) stay, since turning them on or off in a
    // context that has decoded (llama.cpp then reserves its graphs anew) corrupted memory on Vulkan. Each build answers
    // each policy in turn at one budget, as a conversation whose policy is switched between answers.
    it("switches policies between answers at one budget: TRIM-KV, StreamingLLM, H2O, LAVa, H2O", async () => {
        const history: ChatTurn[] = [{role: "user", text: question}];
        for (const policy of ["trimkv", "streamingllm", "h2o", "lava", "h2o"] as const) {
            const c: Case = {policy, flashAttention: false, kvType: "f16", kvTypeV: "f16", cells: 240};
            const [onVulkan, onCpu] = await Promise.all([record(vulkan, c, history), record(cpu, c, history)]);
            const comparison = compareRuns(onVulkan, onCpu);
            report.push(
                `switch to ${policy.padEnd(12)} at one budget: first divergence ${comparison.firstDivergence ?? "none"} of ${comparison.compared}; ` +
                    `counters differ at ${comparison.countersDiffer} samples before it`
            );
            expect(comparison.countersDiffer, policy).toBe(0);
        }
    });
});
