// Decode speed of node-llama-cpp's stock prebuilt binary vs Ponder's patched build (scoring off, scoring on), measured in
// the same run on the same generated model, at several KV sizes, flash attention off and on.
//
//   npx tsx native/bench.ts [--cells 512,2048,4096] [--tokens 64] [--repeats 7] [--threads N (default: cores - 1)]
//                           [--read-every 16] [--clock wall|cpu] [--compare-build <folder> [--compare-on]]
//                           [--toggle [--gates [--gate-hidden 512] | --value-norms | --calibration]] [--shape default|1.5b]
//                           [--model <file.gguf>]
//
// With scoring on, the per-head scores of every layer are read out (`NativeKv.scores()`) every --read-every tokens, as
// the engine does once per prune round (its `pruneEvery`, 16 by default); 0 never reads them.
//
// --clock cpu divides by the CPU time the child process used (user + system, all its threads) instead of the elapsed
// time: on a machine shared with other jobs, time spent waiting for a core then does not count. Use it with --threads 1
// (more threads can spin while they wait for each other).
//
// --toggle measures only scoring's cost, more finely: one process, the patched build, one context per config, scoring
// turned on and off in turn (3 warm-up tokens after each switch, which rebuilds the graph, then --tokens measured); the
// ratio is the median over the rounds of on / off. The cache is filled to leave room for every round, so the attended
// cells grow by 2 x (tokens + 3) per round, alike for on and off.
//
// --toggle --gates toggles TRIM-KV's retention gates instead of scoring (random gates of the paper's shape, a 512-wide
// hidden layer, for the bench model, or --gate-hidden wide; the gate logits read out every --read-every tokens, as a prune
// round does).
// --shape 1.5b measures on six layers of the shape of DeepSeek-R1-Distill-Qwen-1.5B instead of the default 12-layer,
// 768-wide model: a per-layer cost such as the gates' is a smaller share of a wider layer's work.
// --toggle --value-norms toggles LAVa's value norms instead (each written token's value L1 norm per layer and KV head,
// computed in the graph; read out every --read-every tokens, as a prune round does). Scoring stays off in both halves, so
// the ratio is the norms' own cost; LAVa runs with scoring on too, whose cost `--toggle` alone measures.
// --toggle --calibration toggles the read-outs of a retention calibration (native/patches 0012): the read horizons
// (threshold 0.5) and the capture of each layer's attn_norm rows, taken after every token as collectCalibrationData does
// (the horizons read out every --read-every tokens); it prints the bytes captured per token.
// --model <file.gguf> (with --toggle) measures on that model instead of a bench shape (e.g. the bench-1.5b-shape fixture).
//
// --compare-build adds a fourth engine, with scoring off: another complete local build folder (for instance the unpatched
// build `node native/build.mjs --unpatched` writes to native/.build/unpatched/, or a copy of `localBuilds/linux-x64` in
// another configuration), so that build configuration and patches are measured apart in one run; an unpatched build
// adds the column "off / unpatched". It is copied into node-llama-cpp's local builds
// under the folder name getLlama gives the custom CMake option PONDER_BENCH_BUILD=1, and removed afterwards. With
// --compare-on it runs with scoring on instead (and reads the scores out likewise), to compare two versions of scoring.
//
// Each binary runs in its own child process: the stock and patched builds both ship a `libllama.v0.5.0.so`, and a process
// that loaded one would resolve the other's symbols against it. The children fill their caches first; then the parent
// asks them for runs in turn (stock, off, on, stock, ...) so that a change of machine load hits every variant alike.
import {spawn, type ChildProcessWithoutNullStreams} from "node:child_process";
import {cp, mkdir, rm, stat} from "node:fs/promises";
import {createHash} from "node:crypto";
import {createRequire} from "node:module";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import {createInterface} from "node:readline";
import {fileURLToPath} from "node:url";
import {getLlama, type ControlledEvaluateInputItem, type Llama, type Token} from "node-llama-cpp";
import {generateModel, specHash, type ModelSpec} from "../test/fixtures/gguf/generateModel.js";
import {fixturesDir} from "../test/fixtures/gguf/fixtures.js";
import {writeRetentionSidecar} from "../test/fixtures/gguf/retentionSidecar.js";
import {getNativeBuildInfo, loadPatchedLlama} from "../main/engine/native/loadPatchedLlama.js";
import {NativeKv} from "../main/engine/native/NativeKv.js";

type Variant = "stock" | "compare-off" | "compare-on" | "patched-off" | "patched-on";

const compareBuildOption = {PONDER_BENCH_BUILD: "1"};

type Config = {cells: number; flashAttention: boolean};

/** The bench models (--shape): random weights, F16. */
const benchShapes: Record<string, Partial<ModelSpec>> = {
    /** Mid-sized: big enough that a decode step is dominated by real work, not call overhead. */
    default: {arch: "qwen2", name: "ponder-bench", nLayer: 12, nEmbd: 768, nHead: 12, nHeadKv: 4, nFf: 2048, nCtxTrain: 8192, seed: 42},
    /**
     * The layers of DeepSeek-R1-Distill-Qwen-1.5B, the smallest model Ponder is for (1536 wide, 12 / 2 heads of 128,
     * feed-forward 8960), six of its 28: per-layer costs such as the gates' keep their share of a decode step.
     */
    "1.5b": {
        arch: "qwen2",
        name: "ponder-bench-1.5b-layers",
        nLayer: 6,
        nEmbd: 1536,
        nHead: 12,
        nHeadKv: 2,
        nFf: 8960,
        nCtxTrain: 8192,
        seed: 42
    }
};

const shapeArg = process.argv.includes("--shape") ? process.argv[process.argv.indexOf("--shape") + 1]! : "default";
if (benchShapes[shapeArg] == null) throw new Error(`--shape: ${Object.keys(benchShapes).join(" or ")}, not ${shapeArg}`);
const benchSpec = benchShapes[shapeArg]!;

function parseArgs() {
    const args = process.argv.slice(2);
    const value = (name: string) => {
        const index = args.indexOf(name);
        return index >= 0 ? args[index + 1] : undefined;
    };
    return {
        child: value("--child") as Variant | undefined,
        modelPath: value("--model"),
        cells: (value("--cells") ?? "512,2048,4096").split(",").map(Number),
        compareBuild: value("--compare-build"),
        compareOn: args.includes("--compare-on"),
        readEvery: Number(value("--read-every") ?? 16),
        clock: (value("--clock") ?? "wall") as "wall" | "cpu",
        toggle: args.includes("--toggle"),
        gates: args.includes("--gates"),
        gateHidden: Number(value("--gate-hidden") ?? 512),
        valueNorms: args.includes("--value-norms"),
        calibration: args.includes("--calibration"),
        tokens: Number(value("--tokens") ?? 64),
        repeats: Number(value("--repeats") ?? 7),
        threads: Number(value("--threads") ?? Math.max(1, os.availableParallelism() - 1))
    };
}

async function ensureBenchModel(): Promise<string> {
    const modelPath = path.join(fixturesDir(), `ponder-native-bench-${specHash(benchSpec)}.gguf`);
    if ((await stat(modelPath).catch(() => null)) == null) {
        console.log(`generating the bench model (${benchSpec.nLayer} layers, ${benchSpec.nEmbd} wide) into ${modelPath}`);
        await mkdir(path.dirname(modelPath), {recursive: true});
        await generateModel(modelPath, benchSpec);
    }
    return modelPath;
}

// maxThreads 0: no node-llama-cpp thread budget shared between the contexts (four contexts stay alive per process)
async function loadVariant(variant: Variant): Promise<Llama> {
    if (variant === "stock") {
        // node-llama-cpp prefers a local build; a custom cmake option makes it look for a local build that does not
        // exist, so it takes the prebuilt @node-llama-cpp/<platform> binary (existingPrebuiltBinaryMustMatchBuildOptions
        // is false by default)
        const llama = await getLlama({
            gpu: false,
            build: "never",
            usePrebuiltBinaries: true,
            cmakeOptions: {PONDER_BENCH_STOCK: "1"},
            maxThreads: 0,
            logLevel: "error" as never
        });
        const info = getNativeBuildInfo(llama);
        if (info.kind !== "prebuilt" || info.patched) throw new Error(`expected the stock prebuilt binary, got ${JSON.stringify(info)}`);
        return llama;
    }
    if (variant === "compare-off" || variant === "compare-on")
        return await getLlama({
            gpu: false,
            build: "never",
            usePrebuiltBinaries: false,
            cmakeOptions: compareBuildOption,
            maxThreads: 0,
            logLevel: "error" as never
        });
    return await loadPatchedLlama({gpu: false, logLevel: "error", llamaOptions: {maxThreads: 0}});
}

/** Where getLlama looks for a local build made with {@link compareBuildOption} (its getBuildFolderNameForBuildOptions). */
function compareBuildFolder(): string {
    const entry = createRequire(import.meta.url).resolve("node-llama-cpp");
    const llamaDir = path.join(entry.slice(0, entry.lastIndexOf("node-llama-cpp") + "node-llama-cpp".length), "llama");
    const hash = Array.from(
        createHash("sha1")
            .update(
                Object.entries(compareBuildOption)
                    .map(([key, value]) => `${key}=${value}`)
                    .join(";")
            )
            .digest()
    )
        .map((byte) => byte.toString(36))
        .join("");
    const platform = {linux: "linux", darwin: "mac", win32: "win"}[process.platform as string] ?? process.platform;
    return path.join(llamaDir, "localBuilds", `${platform}-${process.arch}-${hash}`);
}

function randomToken(state: {seed: number}): Token {
    state.seed = (Math.imul(state.seed, 1664525) + 1013904223) >>> 0;
    return (40 + ((state.seed >>> 8) % 210)) as Token;
}

type Prepared = {config: Config; step(): Promise<void>; dispose(): Promise<void>};

/** Child: loads one binary, prepares a filled context per config, then measures whatever the parent asks for. */
async function runChild(variant: Variant, modelPath: string, configs: Config[], threads: number, readEvery: number, clock: "wall" | "cpu") {
    const llama = await loadVariant(variant);
    const info = getNativeBuildInfo(llama);
    const build = `${info.kind}${info.patched ? ` patched ${info.seriesHash}` : ""}`;
    const model = await llama.loadModel({modelPath});
    const prepared: Prepared[] = [];
    for (const config of configs) {
        const context = await model.createContext({
            contextSize: config.cells,
            flashAttention: config.flashAttention,
            threads,
            batchSize: 512
        });
        const scoring = variant === "patched-on" || variant === "compare-on";
        const kv = variant === "patched-off" || scoring ? new NativeKv(context) : null;
        const sequence = context.getSequence();
        if (scoring) await kv!.configureScoring({enabled: true, rows: 1, gamma: 0.95});

        // fill the cache so that decoding attends to about `cells` cells
        const state = {seed: 7};
        await sequence.evaluateWithoutGeneratingNewTokens(Array.from({length: config.cells - 256}, () => randomToken(state)));

        let next = randomToken(state);
        let steps = 0;
        const step = async () => {
            const input: ControlledEvaluateInputItem[] = [[next, {generateNext: {token: true}}]];
            const [output] = await sequence.controlledEvaluate(input);
            next = output?.next.token ?? randomToken(state);
            if (scoring && readEvery > 0 && ++steps % readEvery === 0) await kv!.scores(0); // the context's only sequence
        };
        for (let i = 0; i < 8; i++)
            // warm-up: graph (re)build, caches
            await step();
        prepared.push({
            config,
            step,
            async dispose() {
                await kv?.dispose();
                await context.dispose();
            }
        });
    }
    send({type: "ready", build});

    const seconds = clockSeconds(clock);
    for await (const line of createInterface({input: process.stdin})) {
        const request = JSON.parse(line) as {type: "measure"; index: number; tokens: number} | {type: "exit"};
        if (request.type === "exit") break;
        const {step} = prepared[request.index]!;
        const start = seconds();
        for (let i = 0; i < request.tokens; i++) await step();
        send({type: "measured", tokensPerSecond: request.tokens / (seconds() - start)});
    }

    for (const item of prepared) await item.dispose();
    await model.dispose();
    await llama.dispose();
    process.exit(0); // stdin's reader would keep the process alive
}

/** Seconds on the chosen clock: elapsed, or the CPU time of this process. */
function clockSeconds(clock: "wall" | "cpu"): () => number {
    if (clock === "wall") return () => performance.now() / 1000;
    return () => {
        const {user, system} = process.cpuUsage();
        return (user + system) / 1e6;
    };
}

function median(values: number[]): number {
    return [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
}

/** Random retention gates of TRIM-KV's shape (hidden 512, or --gate-hidden) for the bench model, written once beside it. */
async function benchGates(modelPath: string, hidden: number): Promise<string> {
    const gatesPath = modelPath.replace(/\.gguf$/, hidden === 512 ? ".retention.gguf" : `.retention-h${hidden}.gguf`);
    if ((await stat(gatesPath).catch(() => null)) == null) {
        await writeRetentionSidecar(gatesPath, {
            modelPath,
            architecture: "qwen2",
            layers: benchSpec.nLayer!,
            width: benchSpec.nEmbd!,
            kvHeads: benchSpec.nHeadKv!,
            hidden,
            weightScale: 0.05,
            biasRange: [10, 14],
            weightType: "f16"
        });
    }
    return gatesPath;
}

/**
 * What --toggle switches on and off: scoring, TRIM-KV's retention gates, LAVa's value norms or the calibration read-outs;
 * `perToken` runs after every token while on (returns bytes taken).
 */
type Toggled = {name: string; set(enabled: boolean): Promise<unknown>; read(): Promise<unknown>; perToken?(): Promise<number>};

function toggled(kv: NativeKv, args: ReturnType<typeof parseArgs>, gates: string | null): Toggled {
    if (args.calibration) {
        return {
            name: "calibration read-outs",
            set: async (enabled) => {
                await kv.configureNormCapture(enabled);
                await kv.configureReadHorizon(enabled ? 0.5 : null);
            },
            read: () => kv.readHorizon(0),
            perToken: async () => (await kv.takeCapturedNorms()).rows.byteLength
        };
    }
    if (gates != null)
        return {name: "retention gates", set: (enabled) => kv.configureRetention(enabled ? gates : null), read: () => kv.retention(0)};
    if (args.valueNorms) return {name: "value norms", set: (enabled) => kv.configureValueNorms(enabled), read: () => kv.valueNorms(0)};
    return {
        name: "scoring",
        set: (enabled) => kv.configureScoring(enabled ? {enabled, rows: 1, gamma: 0.95} : {enabled}),
        read: () => kv.scores(0)
    };
}

/**
 * --toggle: scoring (or, with --gates, the retention gates; with --value-norms, the value norms) on and off in turn in one
 * context of the patched build, per config.
 */
async function runToggle(modelPath: string, configs: Config[], args: ReturnType<typeof parseArgs>) {
    if ([args.gates, args.valueNorms, args.calibration].filter(Boolean).length > 1)
        throw new Error("--toggle: --gates, --value-norms and --calibration are measured one at a time");
    const llama = await loadPatchedLlama({gpu: false, logLevel: "error", llamaOptions: {maxThreads: 0}});
    const build = getNativeBuildInfo(llama);
    const model = await llama.loadModel({modelPath});
    const seconds = clockSeconds(args.clock);
    if (!Number.isInteger(args.gateHidden) || args.gateHidden < 1)
        throw new Error(`--gate-hidden: a positive integer, not ${args.gateHidden}`);
    const gates = args.gates ? await benchGates(modelPath, args.gateHidden) : null;
    const warmUp = 3;
    const rows: string[] = [];
    let name = "";
    let bytesPerToken = 0;
    for (const config of configs) {
        const room = 2 * (args.tokens + warmUp) * args.repeats + 8;
        if (room >= config.cells)
            throw new Error(`--toggle: ${args.repeats} rounds of 2 x ${args.tokens + warmUp} tokens do not fit in ${config.cells} cells`);
        const context = await model.createContext({
            contextSize: config.cells,
            flashAttention: config.flashAttention,
            threads: args.threads,
            batchSize: 512
        });
        const kv = new NativeKv(context);
        const feature = toggled(kv, args, gates);
        name = feature.name;
        const sequence = context.getSequence();
        const state = {seed: 7};
        await sequence.evaluateWithoutGeneratingNewTokens(Array.from({length: config.cells - room}, () => randomToken(state)));

        let next = randomToken(state);
        const step = async () => {
            const [output] = await sequence.controlledEvaluate([[next, {generateNext: {token: true}}]]);
            next = output?.next.token ?? randomToken(state);
        };
        const rates = {on: [] as number[], off: [] as number[]};
        for (let round = 0; round < args.repeats; round++) {
            for (const enabled of [true, false]) {
                await feature.set(enabled);
                for (let i = 0; i < warmUp; i++) await step();
                await feature.perToken?.();
                const start = seconds();
                for (let i = 1; i <= args.tokens; i++) {
                    await step();
                    if (enabled && feature.perToken != null) bytesPerToken = await feature.perToken();
                    if (enabled && args.readEvery > 0 && i % args.readEvery === 0) await feature.read();
                }
                (enabled ? rates.on : rates.off).push(args.tokens / (seconds() - start));
            }
        }
        await kv.dispose();
        await context.dispose();
        const ratio = median(rates.on.map((on, round) => on / rates.off[round]!));
        rows.push(
            `| ${config.cells - room} to ${config.cells - 8} | ${config.flashAttention ? "on" : "off"} | ${median(rates.off).toFixed(1)} | ` +
                `${median(rates.on).toFixed(1)} | ${ratio.toFixed(3)} |`
        );
    }
    await model.dispose();
    await llama.dispose();

    console.log();
    console.log(
        `model: ${path.basename(modelPath)}, ${args.threads} threads, ${os.cpus()[0]?.model ?? "cpu"}; patched ${build.seriesHash}`
    );
    console.log(
        `${name} on and off in turn in one context, ${args.repeats} rounds of ${args.tokens} tokens, tok/s per second ` +
            `${args.clock === "cpu" ? "of CPU time" : "elapsed"}; ${name === "scoring" ? "scores" : name} read out ` +
            `${args.readEvery > 0 ? `every ${args.readEvery} tokens` : "never"}`
    );
    if (bytesPerToken > 0) console.log(`attn_norm rows captured per token: ${bytesPerToken} bytes (F16, every layer)`);
    console.log();
    console.log("| cells in use | flash attn | off tok/s | on tok/s | on / off (median of rounds) |");
    console.log("|-------------:|:----------:|----------:|---------:|----------------------------:|");
    for (const row of rows) console.log(row);
}

function send(message: object) {
    process.stdout.write("@@" + JSON.stringify(message) + "\n");
}

/** Parent side of a child: requests in, one reply per request. */
class Child {
    private readonly process: ChildProcessWithoutNullStreams;
    private readonly replies: ((message: Record<string, unknown>) => void)[] = [];
    private readonly unclaimed: Record<string, unknown>[] = [];
    private readonly exited: Promise<number | null>;
    private stderr = "";

    public constructor(variant: Variant, modelPath: string, cells: number[], threads: number, readEvery: number, clock: string) {
        this.process = spawn(
            process.execPath,
            [
                ...process.execArgv,
                fileURLToPath(import.meta.url),
                "--child",
                variant,
                "--model",
                modelPath,
                "--cells",
                cells.join(","),
                "--threads",
                String(threads),
                "--read-every",
                String(readEvery),
                "--clock",
                clock
            ],
            {stdio: ["pipe", "pipe", "pipe"]}
        );
        this.process.stderr.on("data", (chunk: Buffer) => {
            this.stderr += chunk.toString();
        });
        createInterface({input: this.process.stdout}).on("line", (line) => {
            if (!line.startsWith("@@")) return;
            const message = JSON.parse(line.slice(2)) as Record<string, unknown>;
            const resolve = this.replies.shift();
            if (resolve != null) resolve(message);
            else this.unclaimed.push(message);
        });
        this.exited = new Promise((resolve) => this.process.on("exit", resolve));
    }

    public reply(): Promise<Record<string, unknown>> {
        const message = this.unclaimed.shift();
        if (message != null) return Promise.resolve(message);
        return Promise.race([
            new Promise<Record<string, unknown>>((resolve) => this.replies.push(resolve)),
            this.exited.then((code) => {
                throw new Error(`bench child exited (code ${code}):\n${this.stderr}`);
            })
        ]);
    }

    public async request(message: object): Promise<Record<string, unknown>> {
        const reply = this.reply();
        this.process.stdin.write(JSON.stringify(message) + "\n");
        return await reply;
    }

    public async close() {
        this.process.stdin.write(JSON.stringify({type: "exit"}) + "\n");
        await this.exited;
    }
}

async function main() {
    const args = parseArgs();
    const configs: Config[] = args.cells.flatMap((cells) => [false, true].map((flashAttention) => ({cells, flashAttention})));
    if (args.child != null) {
        await runChild(args.child, args.modelPath!, configs, args.threads, args.readEvery, args.clock);
        return;
    }

    if ((args.gates || args.valueNorms || args.calibration || args.modelPath != null) && !args.toggle)
        throw new Error("--gates, --value-norms, --calibration and --model are measured with --toggle");
    const modelPath = args.modelPath ?? (await ensureBenchModel());
    if (args.toggle) {
        await runToggle(modelPath, configs, args);
        return;
    }
    const compareVariant: Variant = args.compareOn ? "compare-on" : "compare-off";
    const variants: Variant[] = ["stock", ...(args.compareBuild != null ? [compareVariant] : []), "patched-off", "patched-on"];
    if (args.compareBuild != null) {
        await rm(compareBuildFolder(), {recursive: true, force: true});
        await cp(path.resolve(args.compareBuild), compareBuildFolder(), {recursive: true});
    }
    console.log(`preparing the ${variants.length} engines (filling the caches) ...`);
    const children = new Map(
        variants.map((variant) => [variant, new Child(variant, modelPath, args.cells, args.threads, args.readEvery, args.clock)])
    );
    const builds = new Map<Variant, string>();
    for (const [variant, child] of children) builds.set(variant, String((await child.reply()).build));

    // interleave the variants, round after round, so that a change of machine load hits all of them alike
    const rates = new Map<string, number[]>();
    for (const [index, config] of configs.entries()) {
        for (let round = 0; round < args.repeats; round++) {
            for (const [variant, child] of children) {
                const {tokensPerSecond} = await child.request({type: "measure", index, tokens: args.tokens});
                const key = `${variant} ${config.cells} ${config.flashAttention}`;
                rates.set(key, [...(rates.get(key) ?? []), Number(tokensPerSecond)]);
            }
        }
    }
    for (const child of children.values()) await child.close();
    if (args.compareBuild != null) await rm(compareBuildFolder(), {recursive: true, force: true});

    const rate = (variant: Variant, config: Config) => median(rates.get(`${variant} ${config.cells} ${config.flashAttention}`)!);

    console.log();
    console.log(
        `model: ${path.basename(modelPath)} (${benchSpec.nLayer} layers, ${benchSpec.nEmbd} wide, ${benchSpec.nHead}/${benchSpec.nHeadKv} heads, f16), ` +
            `${args.threads} threads, ${os.cpus()[0]?.model ?? "cpu"}`
    );
    console.log(
        `decode tok/s (${args.clock === "cpu" ? "per second of the process's CPU time" : "per second elapsed"}) at about <cells> - 250 cells ` +
            `in use, median of ${args.repeats} interleaved runs of ${args.tokens} tokens; ` +
            `scoring on: rows 1, scores read out ${args.readEvery > 0 ? `every ${args.readEvery} tokens` : "never"}`
    );
    console.log("builds: " + variants.map((variant) => `${variant} = ${builds.get(variant)}`).join(", "));
    console.log();
    const withCompare = args.compareBuild != null;
    // a build from `node native/build.mjs --unpatched`: configuration and patches measured apart
    const unpatched =
        withCompare && (await stat(path.join(path.resolve(args.compareBuild!), "ponder-unpatched.json")).catch(() => null)) != null;
    const compared = `${unpatched ? "unpatched" : "compared"} ${args.compareOn ? "on" : "off"}`;
    console.log(
        `| cells | flash attn | stock tok/s |${withCompare ? ` ${compared} tok/s |` : ""} patched off tok/s | patched on tok/s |` +
            `${withCompare ? ` ${compared} / stock |` : ""} off / stock | on / stock | on / off |${unpatched ? " off / unpatched |" : ""}`
    );
    console.log(
        `|------:|:----------:|------------:|${withCompare ? "-------------------:|" : ""}------------------:|-----------------:|` +
            `${withCompare ? "-----------------:|" : ""}------------:|-----------:|---------:|${unpatched ? "-----------------:|" : ""}`
    );
    for (const config of configs) {
        const [stock, off, on] = [rate("stock", config), rate("patched-off", config), rate("patched-on", config)];
        const comparedRate = withCompare ? rate(compareVariant, config) : 0;
        console.log(
            `| ${config.cells} | ${config.flashAttention ? "on" : "off"} | ${stock.toFixed(1)} |${withCompare ? ` ${comparedRate.toFixed(1)} |` : ""} ` +
                `${off.toFixed(1)} | ${on.toFixed(1)} |${withCompare ? ` ${(comparedRate / stock).toFixed(3)} |` : ""} ` +
                `${(off / stock).toFixed(3)} | ${(on / stock).toFixed(3)} | ${(on / off).toFixed(3)} |${unpatched ? ` ${(off / comparedRate).toFixed(3)} |` : ""}`
        );
    }
}

await main();
