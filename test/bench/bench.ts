// `npm run bench`: every compression policy beside Full KV on the same engine, in the same run.
//
//   npm run bench -- [--suites fidelity,speed,overhead,quality,foresight,server,process,calibrate-leankv,precision,resume,rpc,transfer]
//                    [--policies streamingllm,h2o,lethe,refreekv,leankv,lava] [--budgets 0.25,0.5,0.75] [--model path.gguf] [--length 16384]
//                    [--demo-model resources/models/ponder-demo.gguf] [--merge-model resources/models/ponder-merge.gguf]
//                    [--multi-model resources/models/ponder-multi.gguf] [--recur-model test/eval/models/ponder-recur.gguf]
//                    [--speed-budget 2048] [--speed-heads] [--problems 40] [--fidelity-problems 8] [--models demo,merge,multi]
//                    [--sets demo,local,merge,merge-any,multi,multi-program,multi-merge,multi-sum,multi-chase,multi-reverse,multi-tally]
//                    [--combine aggregate,quota,union]
//                    [--quality-combine quota]
//                    [--server-repeats 10] [--server-tokens 384] [--process-repeats 6] [--process-tokens 768] [--overhead-repeats 5]
//                    [--alphas 0,0.25,0.5,1,2,4] [--calibration-problems 16] [--precision-policy lethe] [--precision-share 0.5]
//                    [--resume-lengths 1024,4096,16384] [--resume-demo-lengths 1024,2048] [--resume-policy lethe] [--resume-repeats 2]
//                    [--rpc-repeats 4] [--rpc-tokens 256]
//                    [--transfer-held-out reverse,tally] [--transfer-sources own,prompts,traces] [--transfer-prompts 56]
//                    [--out test/bench/results] [--threads 2]
//
// calibrate-leankv and precision are not in the default suites: the first picks LeanKV's alpha on training problems,
// the second is LeanKV's Figure 7 ablation (F16, K8V4, K4V8 with Full KV, an eviction policy and LeanKV). resume (not in
// the defaults either) times a conversation's next answer from its KV state on disk against reading the history again.
// rpc (not in the defaults) splits a model across two rpc-servers on loopback against the same model here.
// transfer (not in the defaults) calibrates the many-task model (--multi-model) with the app's calibration on the families
// not in --transfer-held-out, once per --transfer-sources (its own questions; a prompts file of those families' training
// problems; its own answers to them, read), each into a copy of the model, and runs the quality suite on every family's
// held-out set: --policies on the model, TRIM-KV on each copy; a table of the held-out and the calibrated families. It
// writes transfer-progress.json into --out as it goes: the same command with the same --out goes on from there.
//
// The quality and foresight suites run each problem set on the model trained on its task: the demo and local sets on
// --demo-model, the merge and merge-any sets on --merge-model, the many-task model's sets (multi-<family>, one per family,
// and multi, every family mixed) on --multi-model, the recur set on --recur-model. --models names the task models (default: demo): without --sets, those
// suites run every set of the models named (demo: demo and local; merge: merge, whose k is in the second half of the
// merge, and merge-any, any k; multi: a set per family; recur: recur), and the fidelity suite, instead of its table on a generated random-weights
// model (the table it prints without --models), runs each named model on the first --fidelity-problems held-out
// problems of its own task (demo: the demo set; merge: the merge set; multi: every family mixed; recur: the recur set). The speed suite runs on --model (a generated
// model of a real model's shape by default) or, with --models and no --model, on each task model named. The overhead,
// process and rpc suites measure mechanics on generated models of a real model's shape, which --models does not
// change; the server, resume, precision and calibrate-leankv suites run the demo model.
// --policies "" runs Full KV alone (the quality suite's Full rows: what a model answers before any compression).
// --speed-heads adds, for each policy that can keep per-head cells (TRIM-KV), a run on per-head cells beside its shared
// cells' run, at the same budget.
//
// --help prints this text.
//
// Prints Markdown tables and writes results.json, tables.md and SVG plots into the results folder.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {parseArgs} from "node:util";
import type {Llama, LlamaModel, Token} from "node-llama-cpp";
import type {CompressionSettings, PolicyId} from "../../preload/contract.js";
import {fullTrace, measureFidelity} from "../../main/engine/generation/fidelity.js";
import {getNativeBuildInfo, loadPatchedLlama} from "../../main/engine/native/loadPatchedLlama.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {getFixtureModel} from "../fixtures/gguf/fixtures.js";
import {retentionSidecarPath} from "../../main/engine/retention/findRetentionGates.js";
import {policyNeeds} from "../../main/engine/policies/scoring.js";
import {decodeRun} from "./decodeRun.js";
import {retentionGatesFor, speedSuite} from "./speed.js";
import {table, writeBarChart} from "./plot.js";
import {foresightSuite} from "./foresight.js";
import {calibrateLeanKv, precisionSuite} from "./precision.js";
import {problemSets, qualitySuite, type TaskModel} from "./quality.js";
import {benchModels} from "./benchModels.js";
import {taskFidelitySuite} from "./taskFidelity.js";
import {EngineProxy} from "../../main/engine/host/EngineProxy.js";
import {forkEngine} from "../../main/engine/host/forkEngine.js";
import {median} from "./median.js";
import {builtEngineEntry, processRuns, processSuite} from "./processBench.js";
import {resumeSuite} from "./resume.js";
import {rpcSuite} from "./rpcBench.js";
import {heldOutDemoProblems} from "../eval/demoTask.js";
import {serverSuite} from "./serverBench.js";
import {transferSources, transferSuite, type TransferSource} from "./transfer.js";
import {MULTI_FAMILIES, type MultiFamily} from "../../main/demo/multiTask.js";

const {values} = parseArgs({
    options: {
        suites: {type: "string", default: "fidelity,overhead,speed,quality,foresight,server,process"},
        policies: {type: "string", default: "streamingllm,h2o,lethe,refreekv,leankv,lava,oracle"},
        budgets: {type: "string", default: "0.25,0.5,0.75"},
        model: {type: "string"},
        "demo-model": {type: "string", default: path.resolve(import.meta.dirname, "../../resources/models/ponder-demo.gguf")},
        "merge-model": {type: "string", default: path.resolve(import.meta.dirname, "../../resources/models/ponder-merge.gguf")},
        "multi-model": {type: "string", default: path.resolve(import.meta.dirname, "../../resources/models/ponder-multi.gguf")},
        "recur-model": {type: "string", default: path.resolve(import.meta.dirname, "../eval/models/ponder-recur.gguf")},
        length: {type: "string", default: "16384"},
        "speed-budget": {type: "string", default: "2048"},
        "speed-heads": {type: "boolean", default: false},
        problems: {type: "string", default: "40"},
        "fidelity-problems": {type: "string", default: "8"},
        combine: {type: "string", default: "aggregate,quota,union"},
        "quality-combine": {type: "string"},
        models: {type: "string"},
        sets: {type: "string"},
        help: {type: "boolean", default: false},
        "server-repeats": {type: "string", default: "10"},
        "server-tokens": {type: "string", default: "384"},
        "process-repeats": {type: "string", default: "6"},
        "overhead-repeats": {type: "string", default: "5"},
        "process-tokens": {type: "string", default: "768"},
        alphas: {type: "string", default: "0,0.1,0.25,0.5,1,2,4"},
        "calibration-problems": {type: "string", default: "16"},
        "precision-policy": {type: "string", default: "lethe"},
        "precision-share": {type: "string", default: "0.5"},
        "resume-lengths": {type: "string", default: "1024,4096,16384"},
        "resume-demo-lengths": {type: "string", default: "1024,2048"},
        "resume-policy": {type: "string", default: "lethe"},
        "resume-repeats": {type: "string", default: "2"},
        "rpc-repeats": {type: "string", default: "4"},
        "rpc-tokens": {type: "string", default: "256"},
        "transfer-held-out": {type: "string", default: "reverse,tally"},
        "transfer-sources": {type: "string", default: transferSources.join(",")},
        "transfer-prompts": {type: "string", default: "56"},
        out: {type: "string", default: path.resolve(import.meta.dirname, "results")},
        threads: {type: "string", default: String(Math.min(4, os.availableParallelism()))}
    }
});

if (values.help) {
    const source = await fs.readFile(import.meta.filename, "utf8");
    const lines = source.split("\n");
    console.log(
        lines
            .slice(
                0,
                lines.findIndex((line) => !line.startsWith("//"))
            )
            .map((line) => line.replace(/^\/\/ ?/, ""))
            .join("\n")
    );
    process.exit(0);
}

const suites = new Set(values.suites.split(","));
const policyList = values.policies.split(",").filter((policy) => policy !== "");
/** Policies through the engine; "oracle" adds the quality suite's oracle rows (the fidelity suite always has them). */
const policies = policyList.filter((policy) => policy !== "oracle") as PolicyId[];
const budgets = values.budgets.split(",").map(Number);
const {models, sets} = benchModels({models: values.models, sets: values.sets});
/** The file of a task model. */
const modelFile = (name: TaskModel) => values[`${name}-model`];
/** The model a problem set runs on: the one trained on its task. */
const setModel = (set: string) => modelFile(problemSets[set]!.model);
const threads = Number(values.threads);
const out = values.out;
await fs.mkdir(out, {recursive: true});

const llama = await loadPatchedLlama({gpu: "auto", logLevel: "error"});
const build = getNativeBuildInfo(llama);
const results: Record<string, unknown> = {
    date: new Date().toISOString(),
    command: `npm run bench -- ${process.argv.slice(2).join(" ")}`.trim(),
    machine: {cpus: os.cpus()[0]?.model, cores: os.availableParallelism(), memoryGiB: Math.round(os.totalmem() / 2 ** 30)},
    build
};
const tables: string[] = [
    `# Ponder benchmark\n\n\`${results.command as string}\` on ${os.availableParallelism()} cores, llama.cpp ${build.llamaCppRelease} (${build.kind}, gpu: ${String(build.gpu)}), ${results.date as string}.`
];

function settings(policy: PolicyId, patch: Partial<CompressionSettings> = {}): CompressionSettings {
    return {...defaultCompressionSettings, policy, ...patch};
}

function say(text: string): void {
    console.log(text);
    tables.push(text);
}

async function loadModel(llamaInstance: Llama, file: string): Promise<LlamaModel> {
    return llamaInstance.loadModel({modelPath: file});
}

for (const {name, set} of suites.has("fidelity") ? (models ?? []) : []) {
    // Fidelity on a task model's own problems, every policy and combine mode beside the oracle.
    const report = await taskFidelitySuite({
        llama,
        modelPath: modelFile(name),
        set,
        policies,
        combines: values.combine.split(",") as CompressionSettings["combine"][],
        budgets: budgets.filter((share) => share < 1),
        problems: Number(values["fidelity-problems"]),
        threads,
        oracle: policyList.includes("oracle"),
        onProgress: (line) => console.error(`  fidelity ${name} ${line}`)
    });
    ((results.taskFidelity ??= {}) as Record<string, unknown>)[name] = {
        model: path.basename(modelFile(name)),
        set,
        problems: report.problems,
        meanFullCells: report.meanFullCells,
        rows: report.rows
    };
    say(
        `\n## Fidelity vs Full KV on ${report.title} (teacher-forced along Full's greedy thought and answer, ${report.problems} held-out problems, ` +
            `${path.basename(modelFile(name))}; Full's cache ${report.meanFullCells.toFixed(0)} cells on average; each budget a share of that problem's)\n\n` +
            report.table
    );
}

if (suites.has("fidelity") && models == null) {
    // Mechanics on a generated model: how far each policy's next-token distributions move from Full KV.
    const file = values.model ?? (await getFixtureModel("tiny-qwen2"));
    const model = await loadModel(llama, file);
    const prompt = Array.from({length: 64}, (_, i) => (((i * 53) % 500) + 10) as Token);
    const steps = 448;
    const full = prompt.length + steps;
    const reference = await fullTrace(model, prompt, steps, threads, {attention: true});
    const rows: (string | number)[][] = [];
    const json: unknown[] = [];
    for (const share of budgets.filter((b) => b < 1)) {
        const cells = Math.max(64, Math.round(full * share));
        const report = await measureFidelity({
            model,
            prompt,
            steps,
            reference,
            cells,
            threads,
            compression: settings("streamingllm", {pruneEvery: 16}),
            oracle: true
        });
        rows.push([
            "oracle",
            "-",
            `${Math.round(share * 100)}% (${cells})`,
            report.top1Agreement.toFixed(3),
            report.meanKl.toFixed(4),
            report.firstDivergence ?? "none",
            (report.regret ?? 0).toFixed(4),
            report.finalSample.cellsLive,
            0
        ]);
        json.push({policy: "oracle", share, cells, ...report, greedyText: undefined});
    }
    for (const combine of values.combine.split(",") as CompressionSettings["combine"][]) {
        for (const policy of policies) {
            for (const share of budgets.filter((b) => b < 1)) {
                const cells = Math.max(64, Math.round(full * share));
                const report = await measureFidelity({
                    model,
                    prompt,
                    steps,
                    reference,
                    cells,
                    threads,
                    compression: settings(policy, {combine, pruneEvery: 16})
                });
                rows.push([
                    policy,
                    combine,
                    `${Math.round(share * 100)}% (${cells})`,
                    report.top1Agreement.toFixed(3),
                    report.meanKl.toFixed(4),
                    report.firstDivergence ?? "none",
                    (report.regret ?? 0).toFixed(4),
                    report.finalSample.cellsLive,
                    report.finalSample.forcedDrops
                ]);
                json.push({policy, combine, share, cells, ...report});
            }
        }
    }
    await model.dispose();
    results.fidelity = {model: path.basename(file), promptTokens: prompt.length, steps, rows: json};
    say(
        `\n## Fidelity vs Full KV (teacher-forced, ${path.basename(file)}, ${prompt.length}-token prompt + ${steps} tokens; full cache = ${full} cells)\n\n` +
            table(
                [
                    "policy",
                    "combine",
                    "budget",
                    "top-1 agreement",
                    "mean KL (nats)",
                    "first greedy divergence",
                    "regret",
                    "live cells",
                    "forced drops"
                ],
                rows
            )
    );
}

if (suites.has("overhead")) {
    // Scoring cost where nothing is pruned: a short context, cells to spare. Rounds run every configuration once, in
    // turn, so machine load falls on all of them alike; each ratio is to the same round's Full, the median over rounds.
    const file = values.model ?? (await getFixtureModel("bench-1.5b-shape"));
    const model = await loadModel(llama, file);
    const prompt = Array.from({length: 32}, (_, i) => (((i * 29) % 500) + 10) as Token);
    const repeats = Number(values["overhead-repeats"]);
    const rows: (string | number)[][] = [];
    const json: unknown[] = [];
    for (const flashAttention of [false, true]) {
        const runs = [
            {label: "full (scoring off)", policy: "full" as PolicyId},
            ...policies.map((policy) => ({label: `${policy} (${readsLabel(policy)})`, policy}))
        ];
        const speeds = runs.map(() => [] as number[]);
        const ratios = runs.map(() => [] as number[]);
        for (let round = 0; round < repeats; round++) {
            const speedsNow: number[] = [];
            for (const run of runs) {
                const compression = run.policy === "full" ? settings("full") : settings(run.policy, {pruneEvery: 1_000_000});
                speedsNow.push(
                    (
                        await decodeRun(model, {
                            prompt,
                            length: 384,
                            cells: 1024,
                            window: 128,
                            threads,
                            flashAttention,
                            compression,
                            retentionGates: await retentionGatesFor(run.policy, file)
                        })
                    ).tokensPerSecond
                );
            }
            speedsNow.forEach((speed, index) => {
                speeds[index]!.push(speed);
                ratios[index]!.push(speed / speedsNow[0]!);
            });
            console.error(`  overhead flash ${flashAttention} round ${round + 1}/${repeats}`);
        }
        runs.forEach((run, index) => {
            rows.push([run.label, String(flashAttention), median(speeds[index]!).toFixed(1), median(ratios[index]!).toFixed(3)]);
            json.push({policy: run.policy, flashAttention, tokensPerSecond: speeds[index], ratio: median(ratios[index]!)});
        });
    }
    await model.dispose();
    results.overhead = json;
    say(
        `\n## Scoring overhead at short context (${path.basename(file)}, 32-token prompt, 384 tokens, no pruning, ${threads} threads, ` +
            `medians of ${repeats} rounds)\n\n` +
            table(["run", "flash attention", "tokens/s", "ratio to Full (median of the rounds' ratios)"], rows)
    );
}

/** What a policy has the engine compute beside K and V, as the overhead table names it. */
function readsLabel(policy: PolicyId): string {
    const needs = policyNeeds(settings(policy));
    const parts = [
        needs.scores !== false ? "scoring" : null,
        needs.retention === true ? "gates" : null,
        needs.valueNorms === true ? "value norms" : null
    ].filter((part) => part != null);
    return parts.length === 0 ? "positions only" : `${parts.join(" and ")} on`;
}

if (suites.has("speed")) {
    // Decode speed and live KV memory against generated length: Full vs each policy, same run (Lethe Fig. 4's shape): on
    // --model (a generated model of a real model's shape by default), or on each task model --models names.
    const files =
        models == null || values.model != null
            ? [{file: values.model ?? (await getFixtureModel("bench-1.5b-shape")), suffix: ""}]
            : models.map(({name}) => ({file: modelFile(name), suffix: `-${name}`}));
    const speed: Record<string, unknown> = {};
    for (const {file, suffix} of files) {
        const report = await speedSuite({
            llama,
            file,
            policies,
            length: Number(values.length),
            budget: Number(values["speed-budget"]),
            threads,
            out,
            suffix,
            headCells: values["speed-heads"]
        });
        speed[path.basename(file)] = report.json;
        say(report.markdown);
    }
    results.speed = speed;
}

for (const set of sets) {
    if (!suites.has("quality")) break;
    const report = await qualitySuite({
        llama,
        modelPath: setModel(set),
        policies: policyList as (PolicyId | "oracle")[],
        budgets,
        problems: Number(values.problems),
        threads,
        set,
        combine: values["quality-combine"] as CompressionSettings["combine"] | undefined,
        fidelityProblems: Number(values["fidelity-problems"]),
        onProgress: (line) => console.error(`  quality ${set} ${line}`)
    });
    (results.quality ??= {}) as Record<string, unknown>;
    (results.quality as Record<string, unknown>)[set] = report.json;
    const chart = set === "demo" ? "accuracy.svg" : `accuracy-${set}.svg`;
    const bars = report.rows.map((row) => ({
        group: row.policy === "refreekv (paper)" ? "no cap" : `${Math.round(row.share * 100)}%`,
        series: row.policy,
        y: row.accuracy
    }));
    await writeBarChart(path.join(out, chart), {
        title: `Accuracy by KV budget (share of the Full cache): ${set}`,
        x: "budget",
        y: "accuracy",
        rows: bars
    });
    say(
        `\n## Accuracy on ${report.title} (${report.problems} held-out problems, greedy)\n\n` +
            report.table +
            `\n\n![accuracy](${chart})` +
            (report.failures.length > 0
                ? `\n\nGenerations that failed (counted as wrong):\n\n${report.failures.map((f) => `- ${f}`).join("\n")}`
                : "")
    );
}

if (suites.has("transfer")) {
    const heldOut = values["transfer-held-out"].split(",") as MultiFamily[];
    const sources = values["transfer-sources"].split(",") as TransferSource[];
    if (heldOut.some((family) => !MULTI_FAMILIES.includes(family)))
        throw new Error(`--transfer-held-out takes ${MULTI_FAMILIES.join(", ")}`);
    if (sources.some((source) => !transferSources.includes(source)))
        throw new Error(`--transfer-sources takes ${transferSources.join(", ")}`);
    const report = await transferSuite({
        llama,
        modelPath: values["multi-model"],
        heldOut,
        sources,
        policies,
        budgets,
        problems: Number(values.problems),
        threads,
        calibrationPrompts: Number(values["transfer-prompts"]),
        // the same --out goes on from where a stopped run was: its copies and calibrations here, its rows in the progress file
        workDir: path.join(os.tmpdir(), `ponder-transfer-${path.basename(path.resolve(out))}`),
        progressFile: path.join(out, "transfer-progress.json"),
        onProgress: (line) => console.error(`  transfer ${line}`)
    });
    results.transfer = report.json;
    say(`\n## Gates calibrated on some of the many-task model's families, on the families held out\n\n${report.markdown}`);
}

if (suites.has("calibrate-leankv")) {
    // LeanKV's alpha_l, picked offline on training problems as its §7.2 does (never the held-out ones).
    const report = await calibrateLeanKv({
        llama,
        modelPath: values["demo-model"],
        alphas: values.alphas.split(",").map(Number),
        problems: Number(values["calibration-problems"]),
        threads,
        onProgress: (line) => console.error(`  calibrate-leankv ${line}`)
    });
    results.calibrateLeanKv = report;
    say(
        `\n## LeanKV's alpha calibrated on ${report.problems} training problems (seeds ${report.seeds.join(" to ")}, greedy, no budget that binds)\n\n` +
            report.table +
            `\n\nChosen (the highest accuracy, then the largest alpha): alpha = ${report.chosen}.`
    );
}

if (suites.has("precision")) {
    // LeanKV's Figure 7: keys and values at their own precision, with Full KV and with an eviction policy.
    const policy = values["precision-policy"] as PolicyId;
    const share = Number(values["precision-share"]);
    const report = await precisionSuite({
        llama,
        modelPath: values["demo-model"],
        policy,
        share,
        problems: Number(values.problems),
        threads,
        leankv: policy !== "leankv",
        onProgress: (line) => console.error(`  precision ${line}`)
    });
    results.precision = report;
    say(
        `\n## Keys and values at their own precision (LeanKV Fig. 7) on ${report.problems} held-out demo problems, greedy, flash attention on\n\n` +
            report.table
    );
}

for (const set of sets) {
    // What attention history foretells: the information every policy here ranks by, along Full's traces.
    if (!suites.has("foresight")) break;
    const gates = retentionSidecarPath(setModel(set));
    const report = await foresightSuite({
        llama,
        modelPath: setModel(set),
        problems: Number(values.problems),
        threads,
        set,
        retention: await fs.access(gates).then(
            () => gates,
            () => undefined
        ),
        onProgress: (line) => console.error(`  foresight ${set} ${line}`)
    });
    ((results.foresight ??= {}) as Record<string, unknown>)[set] = report.rows;
    say(
        `\n## What attention history foretells on ${report.title} (${values.problems} held-out problems, Full's greedy traces)\n\n` +
            report.table
    );
}

for (const where of suites.has("server") ? (["in-process", "engine process"] as const) : []) {
    // The OpenAI-compatible server (HTTP, SSE, the openai client) against the engine called directly, same engine, same run:
    // the engine in this process, then in the engine process as the app runs it.
    const processEngine =
        where === "engine process"
            ? new EngineProxy({spawn: forkEngine({entry: builtEngineEntry(), args: [`--threads=${threads}`]})})
            : undefined;
    const report = await serverSuite({
        llama,
        build,
        modelPath: values["demo-model"],
        threads,
        repeats: Number(values["server-repeats"]),
        engine: processEngine,
        maxTokens: Number(values["server-tokens"]),
        policy: "lethe",
        cells: 512,
        onProgress: (line) => console.error(`  server (${where}) ${line}`)
    });
    results[where === "in-process" ? "server" : "serverEngineProcess"] = report;
    const {engine, server} = report.summary;
    say(
        `\n## API server vs the engine called directly, the engine ${where === "in-process" ? "in the same process" : "in the engine process"} (${report.model}, Lethe at 512 cells, ${values["server-tokens"]} tokens, ` +
            `${threads} threads, medians of ${values["server-repeats"]} pairs run back to back, streaming through the openai client)\n\n` +
            table(
                ["path", "decode tok/s (at the client)", "time to first token (ms)", "decode tok/s (inside the server)"],
                [
                    ["engine, direct", engine.tokensPerSecond.toFixed(1), engine.firstTokenMs.toFixed(1), "–"],
                    [
                        "API server",
                        server.tokensPerSecond.toFixed(1),
                        server.firstTokenMs.toFixed(1),
                        server.serverSideTokensPerSecond.toFixed(1)
                    ],
                    [
                        "ratio (server / direct, median over pairs)",
                        report.decodeRatio.toFixed(3),
                        report.firstTokenRatio.toFixed(3),
                        report.serverSideDecodeRatio.toFixed(3)
                    ]
                ]
            )
    );
}

if (suites.has("process")) {
    // The engine behind the process boundary (as the app runs it) against the same engine in this process, same run.
    const benchModel = values.model ?? (await getFixtureModel("bench-1.5b-shape"));
    const tokens = Number(values["process-tokens"]);
    const runs = processRuns({full: tokens + 256, pruned: 256});
    const report = await processSuite({
        llama,
        build,
        modelPath: benchModel,
        threads,
        repeats: Number(values["process-repeats"]),
        maxTokens: tokens,
        runs,
        restarts: 5,
        onProgress: (line) => console.error(`  process ${line}`)
    });
    results.process = report;
    say(
        `\n## The engine process vs the engine in the caller's process (${path.basename(benchModel)}, ${tokens} tokens, ${threads} threads, ` +
            `medians of ${values["process-repeats"]} pairs run back to back, tokens timed where the caller receives them)\n\n` +
            table(
                [
                    "policy (cells)",
                    "in-process decode tok/s",
                    "engine process decode tok/s",
                    "ratio",
                    "in-process first token (ms)",
                    "engine process first token (ms)",
                    "ratio"
                ],
                report.rows.map((row, index) => [
                    `${row.label} (${runs[index]!.cells})`,
                    row.inProcess.tokensPerSecond.toFixed(1),
                    row.engineProcess.tokensPerSecond.toFixed(1),
                    row.decodeRatio.toFixed(3),
                    row.inProcess.firstTokenMs.toFixed(1),
                    row.engineProcess.firstTokenMs.toFixed(1),
                    row.firstTokenRatio.toFixed(3)
                ])
            ) +
            `\n\nStarting the engine process and loading the model: ${report.coldStartMs.toFixed(0)} ms. From a SIGKILL of the engine process to the model ` +
            `loaded again in a new one: median ${report.restartMedianMs.toFixed(0)} ms over ${report.restartMs.length} kills (${report.restartMs.map((ms) => ms.toFixed(0)).join(", ")}).`
    );
}

if (suites.has("rpc")) {
    // A model split across two rpc-servers on loopback against the same model on this machine, both in engine processes.
    const tokens = Number(values["rpc-tokens"]);
    const report = await rpcSuite({
        models: [
            {label: "bench-1.5b-shape", path: values.model ?? (await getFixtureModel("bench-1.5b-shape"))},
            {label: "ponder-demo", path: values["demo-model"]}
        ],
        runs: [
            {label: "Full KV", compression: settings("full"), cells: tokens + 256},
            {label: "Lethe", compression: settings("lethe"), cells: 192}
        ],
        threads: 1,
        repeats: Number(values["rpc-repeats"]),
        maxTokens: tokens,
        question: "Think about the numbers from one to a thousand.",
        onProgress: (line) => console.error(`  rpc ${line}`)
    });
    results.rpc = report.rows;
    say(
        `\n## A model split across two rpc-servers on loopback against the same model on this machine (${tokens} tokens, one thread per ` +
            `engine and per server, every layer on the servers, medians of ${values["rpc-repeats"]} pairs back to back)\n\n${report.table}`
    );
}

if (suites.has("resume")) {
    // A conversation opened again (a fresh engine): its KV state loaded from disk against its history read again, same run.
    const lengthsOf = (list: string) =>
        list
            .split(",")
            .filter((length) => length !== "")
            .map(Number);
    const policy = values["resume-policy"] as PolicyId;
    const repeats = Number(values["resume-repeats"]);
    // A few lines of a demo program (a whole problem is some 600 tokens: too coarse to fill a conversation to its length).
    const demo = heldOutDemoProblems(1)[0]!.question.split("\n").slice(1, 4).join("\n") + "\n";
    const report = await resumeSuite({
        llama,
        build,
        threads,
        repeats,
        policies: ["full", policy],
        onProgress: (line) => console.error(`  resume ${line}`),
        models: [
            {
                label: path.basename(values.model ?? "bench-1.5b-shape").replace(/\.gguf$/, ""),
                path: values.model ?? (await getFixtureModel("bench-1.5b-shape")),
                lengths: lengthsOf(values["resume-lengths"]),
                filler: "Think about the numbers one two three four five six seven eight nine ten. "
            },
            {label: "ponder-demo", path: values["demo-model"], lengths: lengthsOf(values["resume-demo-lengths"]), filler: demo}
        ]
    });
    results.resume = report.rows;
    say(
        `\n## Resume from disk vs read the history again (a fresh engine each time, ${threads} threads, medians of ${repeats} pairs run back to back; ` +
            `Full with every cell, ${policy} at half the tokens; greedy, the next answer's 24 tokens compared)\n\n` +
            report.table
    );
}

await fs.writeFile(path.join(out, "results.json"), JSON.stringify(results, null, 2));
await fs.writeFile(path.join(out, "tables.md"), tables.join("\n") + "\n");
console.log(`\nResults in ${out}`);
await llama.dispose();
