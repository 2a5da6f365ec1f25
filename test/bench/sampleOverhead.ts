// What an answer's memory readings cost its decoding, at the app's cadence: greedy decoding under a pruning policy with a
// memory sample every --sample-every tokens (generateAnswer's min(32, pruneEvery)), each serialized as the engine process
// sends it, for the KvController of each source tree given; the trees take turns in one process, so a change to what
// the rounds read out (per-token scores, the rounds' evictions) is timed against the code before it on the same machine.
//
//   npx tsx test/bench/sampleOverhead.ts --tree /path/to/before --tree . [--model resources/models/ponder-demo.gguf]
//        [--policy trimkv] [--cells 320] [--prune-every 16] [--sample-every 16] [--tokens 1536] [--repeats 5] [--threads 1]
//
// Prints per tree the median decode time and its ratio to the first tree's, in elapsed time and in the CPU time of this
// process (user + system, all its threads: time spent waiting for a core on a shared machine does not count); and, for a
// tree whose controller records per-token scores, the time spent recording and writing them out (its `_keepScored` and
// `_tokenScores`, and serializing the samples' `tokens` and `rounds`) as a share of the decode time of the same runs,
// which a busy machine disturbs far less than the comparison of two runs.
import path from "node:path";
import {parseArgs} from "node:util";
import type {LlamaModel, Token} from "node-llama-cpp";
import {loadPatchedLlama} from "../../main/engine/native/loadPatchedLlama.js";
import {retentionSidecarPath} from "../../main/engine/retention/findRetentionGates.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import type {CompressionSettings, PolicyId} from "../../preload/contract.js";
import {median} from "./median.js";

const {values} = parseArgs({
    options: {
        tree: {type: "string", multiple: true, default: ["."]},
        model: {type: "string", default: "resources/models/ponder-demo.gguf"},
        policy: {type: "string", default: "trimkv"},
        cells: {type: "string", default: "320"},
        "prune-every": {type: "string", default: "16"},
        "sample-every": {type: "string", default: "16"},
        tokens: {type: "string", default: "1536"},
        repeats: {type: "string", default: "5"},
        threads: {type: "string", default: "1"}
    }
});

type Tree = {
    root: string;
    KvController: typeof import("../../main/engine/pruning/KvController.js").KvController;
    NativeKv: typeof import("../../main/engine/native/NativeKv.js").NativeKv;
    gateSequenceDecodes: typeof import("../../main/engine/native/ponderAddon.js").gateSequenceDecodes;
};

/** Milliseconds spent in the per-token records, summed over a tree's runs (see the head of this file). */
const recordMs = new Map<string, number>();

async function loadTree(root: string): Promise<Tree> {
    const from = (file: string) => import(path.resolve(root, file));
    const controller = (await from("main/engine/pruning/KvController.ts")).KvController;
    recordMs.set(root, 0);
    for (const name of ["_keepScored", "_tokenScores"]) {
        const method = controller.prototype[name] as ((...args: unknown[]) => unknown) | undefined;
        if (method == null) continue;
        controller.prototype[name] = function (this: unknown, ...args: unknown[]) {
            const started = performance.now();
            try {
                return method.apply(this, args);
            } finally {
                recordMs.set(root, recordMs.get(root)! + performance.now() - started);
            }
        };
    }
    return {
        root,
        KvController: controller,
        NativeKv: (await from("main/engine/native/NativeKv.ts")).NativeKv,
        gateSequenceDecodes: (await from("main/engine/native/ponderAddon.ts")).gateSequenceDecodes
    };
}

/** The bytes of a sample as the engine process sends it; the time its token records and rounds take to serialize counts as theirs. */
function serialize(root: string, sample: object): number {
    const {tokens, rounds} = sample as {tokens?: unknown; rounds?: unknown};
    if (tokens != null || rounds != null) {
        // Twice: the engine process sends it to the main process, which sends it on to the window.
        const started = performance.now();
        JSON.stringify({tokens, rounds});
        JSON.stringify({tokens, rounds});
        recordMs.set(root, recordMs.get(root)! + performance.now() - started);
    }
    return JSON.stringify(sample).length;
}

/** Milliseconds to decode `tokens` after `prompt`, sampling and serializing the memory reading as the app does. */
async function run(
    tree: Tree,
    model: LlamaModel,
    prompt: Token[],
    compression: CompressionSettings,
    gates: string | null
): Promise<{ms: number; cpuMs: number; bytes: number}> {
    const cells = Number(values.cells);
    const context = await model.createContext({contextSize: cells, threads: Number(values.threads), sequences: 1});
    const kv = new tree.NativeKv(context);
    try {
        kv.setPositionLimit(1 << 22);
        const sequence = context.getSequence();
        const controller = new tree.KvController({
            kv,
            sequenceId: 0,
            compression,
            cells,
            tokensSeen: () => sequence.nextTokenIndex,
            now: () => performance.now(),
            retentionGates: gates
        });
        await controller.start();
        tree.gateSequenceDecodes(sequence, (count, first) => controller.beforeDecode(count, first));
        controller.beginAnswer();
        const sampleEvery = Number(values["sample-every"]);
        let count = 0;
        let bytes = 0;
        const started = performance.now();
        const cpu = process.cpuUsage();
        for await (const _token of sequence.evaluate(prompt, {temperature: 0})) {
            void _token;
            count++;
            controller.onTokens(1);
            if (count % sampleEvery === 0) void controller.sample(0).then((sample) => (bytes += serialize(tree.root, sample)));
            if (count >= Number(values.tokens)) break;
        }
        bytes += serialize(tree.root, await (controller.sample as (tokensPerSecond: number, last?: boolean) => Promise<object>)(0, true));
        const used = process.cpuUsage(cpu);
        if (count < Number(values.tokens)) throw new Error(`the model stopped after ${count} tokens`);
        return {ms: performance.now() - started, cpuMs: (used.user + used.system) / 1000, bytes};
    } finally {
        await kv.dispose();
        await context.dispose();
    }
}

const trees = await Promise.all(values.tree.map(loadTree));
const llama = await loadPatchedLlama({gpu: "auto", logLevel: "error"});
const model = await llama.loadModel({modelPath: path.resolve(values.model)});
const policy = values.policy as PolicyId;
const compression: CompressionSettings = {...defaultCompressionSettings, policy, pruneEvery: Number(values["prune-every"])};
const gates = policy === "trimkv" ? retentionSidecarPath(path.resolve(values.model)) : null;
const prompt = model.tokenize("Q: 3 + 4 * 2 = ? Think step by step.");
const times: number[][] = trees.map(() => []);
const cpuTimes: number[][] = trees.map(() => []);
const sizes: number[] = trees.map(() => 0);
for (let round = 0; round < Number(values.repeats); round++) {
    for (const [index, tree] of trees.entries()) {
        const {ms, cpuMs, bytes} = await run(tree, model, prompt, compression, gates);
        times[index]!.push(ms);
        cpuTimes[index]!.push(cpuMs);
        sizes[index] = bytes;
        console.error(`  ${tree.root} round ${round + 1}: ${ms.toFixed(0)} ms, CPU ${cpuMs.toFixed(0)} ms, ${bytes} bytes of samples`);
    }
}
const base = median(times[0]!);
const cpuBase = median(cpuTimes[0]!);
for (const [index, tree] of trees.entries()) {
    const ms = median(times[index]!);
    const cpuMs = median(cpuTimes[index]!);
    console.log(
        `${tree.root}: median ${ms.toFixed(0)} ms for ${values.tokens} tokens (${(Number(values.tokens) / (ms / 1000)).toFixed(0)} tok/s), ` +
            `ratio ${(ms / base).toFixed(3)}; CPU median ${cpuMs.toFixed(0)} ms, ratio ${(cpuMs / cpuBase).toFixed(3)}; ${sizes[index]} bytes of samples; ` +
            `runs ${times[index]!.map((t) => t.toFixed(0)).join(", ")} ms`
    );
    const total = times[index]!.reduce((sum, t) => sum + t, 0);
    if (recordMs.get(tree.root)! > 0)
        console.log(
            `  ${tree.root}: per-token records took ${recordMs.get(tree.root)!.toFixed(1)} ms of ${total.toFixed(0)} ms of decoding ` +
                `(${((recordMs.get(tree.root)! / total) * 100).toFixed(2)}%)`
        );
}
await model.dispose();
await llama.dispose();
