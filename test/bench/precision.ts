import type {Llama} from "node-llama-cpp";
import type {CompressionSettings, KvCacheType, PolicyId} from "../../preload/contract.js";
import {Engine} from "../../main/engine/runtime/Engine.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {
    EVAL_SEED_BASE,
    extractDemoAnswer,
    generateDemoProblem,
    heldOutDemoProblems,
    isDemoAnswerCorrect,
    type DemoProblem
} from "../eval/demoTask.js";
import {median} from "./median.js";
import {table} from "./plot.js";

// LeanKV (seed 003) on the demo model: the calibration of its pruning threshold on training problems (§7.2), and the
// ablation of its Figure 7 (keys and values at their own precision, §3.1) with Full KV and with an eviction policy.

/** Training problems for calibration: seeds from here up, below the held-out seeds (2^31 up), never the held-out ones. */
const calibrationSeedBase = 0x40000000;

const pruneEvery = 8;
/** Cells of a Full run: the demo model's whole context. */
const fullCells = 4096;
/** Cells for a run no budget should bind (LeanKV as its paper runs it): twice what Full used, within the context. */
const noCap = (used: number) => Math.min(fullCells, used * 2 + 256);

/** The cache pairs of the ablation: F16, LeanKV's K8V4 and its mirror K4V8. */
const precisionPairs: {label: string; kvType: KvCacheType; kvTypeV: KvCacheType}[] = [
    {label: "F16", kvType: "f16", kvTypeV: "f16"},
    {label: "K8V4 (q8_0 K, q4_0 V)", kvType: "q8_0", kvTypeV: "q4_0"},
    {label: "K4V8 (q4_0 K, q8_0 V)", kvType: "q4_0", kvTypeV: "q8_0"}
];

function trainingDemoProblems(count: number): DemoProblem[] {
    if (calibrationSeedBase + count > EVAL_SEED_BASE) throw new Error("Calibration problems would reach the held-out seeds");
    return Array.from({length: count}, (_, i) => generateDemoProblem(calibrationSeedBase + i));
}

type Run = {
    correct: boolean;
    tokens: number;
    promptTokens: number;
    liveBytes: number;
    decodeTokensPerSecond: number | null;
    evicted: number;
};

/** One greedy answer through the app's engine under `compression` in `cells` cells: graded, with its memory and decode speed. */
async function solve(engine: Engine, problem: DemoProblem, compression: CompressionSettings, cells: number): Promise<Run> {
    let text = "";
    let tokens = 0;
    let liveBytes = 0;
    let evicted = 0;
    let first: number | null = null;
    let last = 0;
    let afterFirst = 0;
    const result = await engine.generate({
        history: [{role: "user", text: problem.question}],
        systemPrompt: "",
        temperature: 0,
        maxTokens: 4096,
        signal: new AbortController().signal,
        kv: {compression: {...compression, pruneEvery}, cells},
        onChunk(chunk) {
            const now = performance.now();
            if (first == null) first = now;
            else afterFirst += chunk.tokens;
            last = now;
            tokens += chunk.tokens;
            if (chunk.segment === "answer") text += chunk.text;
        },
        onSample(sample) {
            liveBytes = sample.liveBytes;
            evicted = sample.tokensEvicted;
        }
    });
    const seconds = first == null ? 0 : (last - first) / 1000;
    return {
        correct: isDemoAnswerCorrect(problem, extractDemoAnswer(text)),
        tokens,
        promptTokens: result.promptTokens,
        liveBytes,
        decodeTokensPerSecond: seconds > 0 ? afterFirst / seconds : null,
        evicted
    };
}

async function demoEngine(llama: Llama, modelPath: string, threads: number): Promise<Engine> {
    const engine = new Engine({
        loadLlama: async () => ({llama, build: {kind: "local", gpu: llama.gpu, patched: true, llamaCppRelease: "", seriesHash: null}}),
        threads,
        ownsRuntime: false
    });
    await engine.loadModel(modelPath, null);
    return engine;
}

type Summary = {accuracy: number; meanKiB: number; vsFull: number; decodeTokensPerSecond: number; evicted: number};

function summarise(runs: Run[], fullBytes: number[]): Summary {
    const mean = (values: number[]) => (values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length);
    const speeds = runs.map((run) => run.decodeTokensPerSecond).filter((speed): speed is number => speed != null);
    return {
        accuracy: runs.filter((run) => run.correct).length / runs.length,
        meanKiB: mean(runs.map((run) => run.liveBytes / 1024)),
        vsFull: mean(runs.map((run, index) => run.liveBytes / fullBytes[index]!)),
        decodeTokensPerSecond: mean(speeds),
        evicted: mean(runs.map((run) => run.evicted))
    };
}

/**
 * LeanKV §7.2's offline calibration of alpha_l, on training problems only: every alpha of the grid with no budget that
 * binds (the paper's LeanKV has none), greedy, accuracy and the KV held at the end against Full's. The pick is the
 * paper's rule: the highest accuracy; between equals, the largest alpha (the most memory freed).
 */
export async function calibrateLeanKv(options: {
    llama: Llama;
    modelPath: string;
    alphas: number[];
    problems: number;
    threads: number;
    compression?: Partial<CompressionSettings>;
    onProgress?: (line: string) => void;
}) {
    const engine = await demoEngine(options.llama, options.modelPath, options.threads);
    const problems = trainingDemoProblems(options.problems);
    const base = {...defaultCompressionSettings, ...options.compression};
    try {
        const full: Run[] = [];
        for (const problem of problems) full.push(await solve(engine, problem, {...base, policy: "full"}, fullCells));
        const used = full.map((run) => run.promptTokens + run.tokens + 4);
        const fullBytes = full.map((run) => run.liveBytes);
        const rows = [{alpha: null as number | null, ...summarise(full, fullBytes)}];
        options.onProgress?.(`full: accuracy ${rows[0]!.accuracy.toFixed(3)}`);
        for (const alpha of options.alphas) {
            const runs: Run[] = [];
            for (const [index, problem] of problems.entries()) {
                const compression = {...base, policy: "leankv" as const, params: {...base.params, leankv: {...base.params.leankv, alpha}}};
                runs.push(await solve(engine, problem, compression, noCap(used[index]!)));
            }
            rows.push({alpha, ...summarise(runs, fullBytes)});
            options.onProgress?.(
                `leankv alpha ${alpha}: accuracy ${rows.at(-1)!.accuracy.toFixed(3)}, KV vs Full ${rows.at(-1)!.vsFull.toFixed(3)}`
            );
        }
        const candidates = rows.filter((row) => row.alpha != null);
        const best = Math.max(...candidates.map((row) => row.accuracy));
        const chosen = Math.max(...candidates.filter((row) => row.accuracy === best).map((row) => row.alpha!));
        return {
            problems: problems.length,
            seeds: [calibrationSeedBase, calibrationSeedBase + problems.length - 1],
            rows,
            chosen,
            table: table(
                ["run", "alpha", "accuracy (training problems)", "KV KiB at end", "KV vs Full", "tokens evicted (mean)"],
                rows.map((row) => [
                    row.alpha == null ? "full" : "leankv (no cap)",
                    row.alpha == null ? "-" : String(row.alpha),
                    row.accuracy.toFixed(3),
                    row.meanKiB.toFixed(1),
                    row.vsFull.toFixed(3),
                    row.evicted.toFixed(0)
                ])
            )
        };
    } finally {
        await engine.dispose();
    }
}

/**
 * LeanKV's Figure 7 on the demo model: F16, K8V4 and K4V8 caches, each with Full KV and with `policy` at `share` of the
 * cells the F16 Full run used (the same cells for every pair; its memory differs by the pair), and LeanKV as its paper
 * runs it (its calibrated alpha, no budget that binds); flash attention on for every row (llama.cpp needs it for a
 * quantized V). Accuracy on held-out problems, the KV held at the end (against F16 Full's) and decode speed. Each
 * problem runs every configuration in turn, so the machine's load falls on all of them alike; the speed ratio is the
 * median over problems of the configuration's decode speed over F16 Full's on the same problem.
 */
export async function precisionSuite(options: {
    llama: Llama;
    modelPath: string;
    policy: PolicyId;
    share: number;
    problems: number;
    threads: number;
    leankv: boolean;
    onProgress?: (line: string) => void;
}) {
    const engine = await demoEngine(options.llama, options.modelPath, options.threads);
    const problems = heldOutDemoProblems(options.problems);
    const alpha = defaultCompressionSettings.params.leankv.alpha;
    const configs = precisionPairs.flatMap((pair) => [
        {pair, run: "full", cells: "100%", policy: "full" as PolicyId, budget: () => fullCells},
        {
            pair,
            run: options.policy as string,
            cells: `${Math.round(options.share * 100)}%`,
            policy: options.policy,
            budget: (used: number) => Math.max(32, Math.round(used * options.share))
        },
        ...(options.leankv ? [{pair, run: `leankv (alpha ${alpha})`, cells: "no cap", policy: "leankv" as PolicyId, budget: noCap}] : [])
    ]);
    const runs = configs.map(() => [] as Run[]);
    try {
        for (const [index, problem] of problems.entries()) {
            let used = 0;
            for (const [c, config] of configs.entries()) {
                const compression: CompressionSettings = {
                    ...defaultCompressionSettings,
                    kvType: config.pair.kvType,
                    kvTypeV: config.pair.kvTypeV,
                    flashAttention: true,
                    policy: config.policy
                };
                const run = await solve(engine, problem, compression, config.budget(used));
                // The first configuration is F16 Full: the cells it used set every budget of this problem.
                if (c === 0) used = run.promptTokens + run.tokens + 4;
                runs[c]!.push(run);
            }
            options.onProgress?.(`problem ${index + 1}/${problems.length}`);
        }
    } finally {
        await engine.dispose();
    }
    // F16 Full holds every token of its answer: each row's memory and speed are measured against it, problem by problem.
    const reference = runs[0]!;
    const fullBytes = reference.map((run) => run.liveBytes);
    const rows = configs.map((config, c) => {
        const ratios = runs[c]!.map(
            (run, index) => (run.decodeTokensPerSecond ?? NaN) / (reference[index]!.decodeTokensPerSecond ?? NaN)
        ).filter((ratio) => Number.isFinite(ratio));
        return {
            pair: config.pair.label,
            run: config.run,
            cells: config.cells,
            ...summarise(runs[c]!, fullBytes),
            speedVsFull: median(ratios)
        };
    });
    return {
        problems: problems.length,
        rows,
        table: table(
            [
                "cache (K, V)",
                "policy",
                "budget (share of F16 Full's cells)",
                "accuracy",
                "KV KiB at end",
                "KV vs F16 Full",
                "decode tok/s",
                "decode speed vs F16 Full (median ratio)"
            ],
            rows.map((row) => [
                row.pair,
                row.run,
                row.cells,
                row.accuracy.toFixed(3),
                row.meanKiB.toFixed(1),
                row.vsFull.toFixed(3),
                row.decodeTokensPerSecond.toFixed(1),
                row.speedVsFull.toFixed(3)
            ])
        )
    };
}
