// The speed suite: decode speed and live KV memory against generated length, Full KV beside each policy in the same run
// (Lethe Fig. 4's shape), on one model file: a generated model of a real model's shape, or a task model (--models).
import fs from "node:fs/promises";
import path from "node:path";
import type {Llama} from "node-llama-cpp";
import type {CompressionSettings, PolicyId} from "../../preload/contract.js";
import {inspectModel} from "../../main/engine/runtime/inspectModel.js";
import {retentionSidecarPath} from "../../main/engine/retention/findRetentionGates.js";
import {policyNeeds} from "../../main/engine/policies/scoring.js";
import {policyEntry} from "../../preload/policyCatalogue.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {writeRetentionSidecar} from "../fixtures/gguf/retentionSidecar.js";
import {decodeRun, fixedPrompt, type DecodePoint, type DecodeReads} from "./decodeRun.js";
import {table, writeLineChart} from "./plot.js";

const settings = (policy: PolicyId, patch: Partial<CompressionSettings> = {}): CompressionSettings => ({
    ...defaultCompressionSettings,
    policy,
    ...patch
});

/**
 * Decodes `length` tokens after a fixed 32-token prompt with Full KV (every token kept), then with each policy at `budget`
 * cells; writes `speed<suffix>.svg` and `memory<suffix>.svg` into `out` and returns the runs and their Markdown section.
 */
export async function speedSuite(options: {
    llama: Llama;
    file: string;
    policies: PolicyId[];
    length: number;
    budget: number;
    threads: number;
    out: string;
    /** Appended to the SVG files' names, so that several models' charts share a results folder. */
    suffix?: string;
    /** Also runs each policy that can keep per-head cells (TRIM-KV) on them, beside its shared cells, at the same budget. */
    headCells?: boolean;
}) {
    const {file, length, budget, threads} = options;
    const suffix = options.suffix ?? "";
    const model = await options.llama.loadModel({modelPath: file});
    const window = Math.max(256, Math.floor(length / 16));
    const prompt = fixedPrompt();
    const runs: Record<string, Awaited<ReturnType<typeof decodeRun>>> = {};
    const name = path.basename(file);
    const progress = (run: string) => (p: DecodePoint) =>
        console.error(
            `  speed ${name} ${run}: ${p.tokens}/${length} tokens, ${p.tokensPerSecond.toFixed(1)} tok/s, live KV ${(p.liveBytes / 2 ** 20).toFixed(1)} MiB`
        );
    try {
        runs.full = await decodeRun(model, {
            prompt,
            length,
            cells: length + prompt.length + 16,
            window,
            threads,
            compression: settings("full"),
            onPoint: progress("full")
        });
        for (const policy of options.policies) {
            const combines: CompressionSettings["combine"][] = [
                "auto",
                ...(options.headCells && policyEntry(policy).headCells ? (["heads"] as const) : [])
            ];
            for (const combine of combines) {
                const run = combine === "heads" ? `${policy} (per-head cells)` : policy;
                runs[run] = await decodeRun(model, {
                    prompt,
                    length,
                    cells: budget,
                    window,
                    threads,
                    compression: settings(policy, {pruneEvery: 32, combine}),
                    onPoint: progress(run),
                    retentionGates: await retentionGatesFor(policy, file)
                });
            }
        }
    } finally {
        await model.dispose();
    }

    for (const [run, result] of Object.entries(runs))
        if (result.points.length === 0) throw new Error(`The ${run} run on ${name} ended before its first window of ${window} tokens`);
    const series = (value: (p: DecodePoint) => number) =>
        Object.entries(runs).flatMap(([run, result]) => result.points.map((p) => ({x: p.tokens, y: value(p), series: run})));
    await writeLineChart(path.join(options.out, `speed${suffix}.svg`), {
        title: `Decode speed against generated length (${name})`,
        x: "generated tokens",
        y: "tokens/s",
        rows: series((p) => p.tokensPerSecond)
    });
    await writeLineChart(path.join(options.out, `memory${suffix}.svg`), {
        title: `Live KV memory against generated length (${name})`,
        x: "generated tokens",
        y: "KV MiB",
        rows: series((p) => p.liveBytes / 2 ** 20)
    });
    const full = runs.full!;
    const lastFull = full.points.at(-1)!;
    const rows = Object.entries(runs).map(([run, result]) => {
        const last = result.points.at(-1)!;
        return [
            run,
            run === "full" ? String(full.points.length > 0 ? lastFull.tokens + prompt.length + 16 : 0) : String(budget),
            result.tokensPerSecond.toFixed(1),
            (result.tokensPerSecond / full.tokensPerSecond).toFixed(2),
            last.tokensPerSecond.toFixed(1),
            (last.tokensPerSecond / lastFull.tokensPerSecond).toFixed(2),
            (last.liveBytes / 2 ** 20).toFixed(1),
            (last.liveBytes / lastFull.liveBytes).toFixed(3),
            result.pruneRounds,
            (result.scoringMs / 1000).toFixed(1),
            result.movingMs != null ? (result.movingMs / 1000).toFixed(1) : "-"
        ];
    });
    const markdown =
        `\n## Decode speed and KV memory to ${length} generated tokens (${name}; policies at ${budget} cells)\n\n` +
        table(
            [
                "run",
                "cells",
                "mean tok/s",
                "ratio",
                `tok/s at ${lastFull.tokens}`,
                "ratio",
                "live KV MiB at end",
                "ratio",
                "prune rounds",
                "pruning s",
                "of it moving heads s"
            ],
            rows
        ) +
        "\n\nComputed beside K and V: " +
        Object.entries(runs)
            .map(([run, result]) => `${run}: ${readsText(result.reads)}`)
            .join("; ") +
        "." +
        `\n\n![speed](speed${suffix}.svg) ![memory](memory${suffix}.svg)`;
    return {json: {model: name, length, budget, runs}, markdown};
}

/** What a run's engine computed beside K and V, in words: `scoring (32 rows), value norms`, or `nothing`. */
function readsText(reads: DecodeReads): string {
    const parts = [
        reads.scoringRows > 0 ? `scoring (${reads.scoringRows} rows)` : null,
        reads.retention ? "retention gates" : null,
        reads.valueNorms ? "value norms" : null
    ].filter((part) => part != null);
    return parts.length === 0 ? "nothing" : parts.join(", ");
}

/** The retention gate file a policy needs (TRIM-KV), else `null`: the engine loads gates only for a policy that reads them. */
export async function retentionGatesFor(policy: PolicyId, modelPath: string): Promise<string | null> {
    return policyNeeds(settings(policy)).retention === true ? await gatesFor(modelPath) : null;
}

/**
 * The model's retention gates (TRIM-KV): its gate file when there is one, else, for a generated bench model, random gates
 * of the paper's shape (a 512-wide hidden layer, F16 weights) written beside it: the speed and memory cost, not the choice.
 */
async function gatesFor(modelPath: string): Promise<string> {
    const gates = retentionSidecarPath(modelPath);
    if (
        await fs.access(gates).then(
            () => true,
            () => false
        )
    )
        return gates;
    const info = await inspectModel(modelPath);
    if (info.layers == null || info.embeddingLength == null || info.headCountKv == null)
        throw new Error(`${modelPath}: no retention gates and no shape to make random ones`);
    await writeRetentionSidecar(gates, {
        modelPath,
        architecture: info.architecture ?? "",
        layers: info.layers,
        width: info.embeddingLength,
        kvHeads: info.headCountKv,
        hidden: 512,
        weightScale: 0.05,
        biasRange: [10, 14],
        weightType: "f16"
    });
    return gates;
}
