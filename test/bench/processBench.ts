import fs from "node:fs";
import path from "node:path";
import type {Llama} from "node-llama-cpp";
import type {BuildInfo, CompressionSettings} from "../../preload/contract.js";
import {Engine} from "../../main/engine/runtime/Engine.js";
import type {EngineApi} from "../../main/engine/EngineApi.js";
import {EngineProxy} from "../../main/engine/host/EngineProxy.js";
import {forkEngine} from "../../main/engine/host/forkEngine.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {median} from "./median.js";

type ProcessBenchRun = {
    path: "in-process" | "engine process";
    policy: string;
    firstTokenMs: number;
    tokensPerSecond: number;
    tokens: number;
};

/**
 * The engine behind the process boundary (the built `out/main/engineProcess.js`, as the app and headless mode start it)
 * against the same engine in this process: decode speed and time to the first token where the caller receives the
 * tokens, pairs run back to back in alternating order; then the time from a killed engine process to the model loaded
 * again in a new one.
 */
export async function processSuite(options: {
    llama: Llama;
    build: BuildInfo;
    modelPath: string;
    threads: number;
    repeats: number;
    maxTokens: number;
    runs: Array<{label: string; compression: CompressionSettings; cells: number}>;
    restarts: number;
    onProgress?: (line: string) => void;
}) {
    const entry = builtEngineEntry();
    const local = new Engine({
        loadLlama: async () => ({llama: options.llama, build: options.build}),
        threads: options.threads,
        ownsRuntime: false
    });
    const proxy = new EngineProxy({spawn: forkEngine({entry, args: [`--threads=${options.threads}`]})});
    let request = 0;
    try {
        const coldStarted = performance.now();
        await proxy.start();
        await proxy.loadModel(options.modelPath, null);
        const coldStartMs = performance.now() - coldStarted;
        await local.loadModel(options.modelPath, null);

        const generate = async (
            engine: EngineApi,
            pathName: ProcessBenchRun["path"],
            run: (typeof options.runs)[number]
        ): Promise<ProcessBenchRun> => {
            const started = performance.now();
            let first: number | null = null;
            let firstTokens = 0;
            let last = started;
            let tokens = 0;
            await engine.generate({
                // Its own system prompt each time: neither path reuses the other's prompt from its context.
                history: [{role: "user", text: "Think about the numbers from one to a thousand."}],
                systemPrompt: `Request ${String(request++).padStart(3, "0")}.`,
                temperature: 0,
                maxTokens: options.maxTokens,
                signal: new AbortController().signal,
                kv: {compression: run.compression, cells: run.cells},
                onSample() {},
                onChunk(chunk) {
                    const now = performance.now();
                    if (first == null) {
                        first = now;
                        firstTokens = chunk.tokens;
                    }
                    last = now;
                    tokens += chunk.tokens;
                }
            });
            // Tokens after the first delivery, over the time from the first delivery to the last.
            return {
                path: pathName,
                policy: run.label,
                firstTokenMs: (first ?? last) - started,
                tokensPerSecond: (tokens - firstTokens) / ((last - (first ?? last)) / 1000),
                tokens
            };
        };

        const rows = [];
        const all: ProcessBenchRun[] = [];
        for (const run of options.runs) {
            // One of each to warm up (the context's first allocation), not counted.
            await generate(local, "in-process", run);
            await generate(proxy, "engine process", run);
            const ratios: {decode: number; firstToken: number}[] = [];
            const runs: ProcessBenchRun[] = [];
            for (let index = 0; index < options.repeats; index++) {
                const order = index % 2 === 0 ? (["local", "proxy"] as const) : (["proxy", "local"] as const);
                const pair: ProcessBenchRun[] = [];
                for (const which of order)
                    pair.push(await generate(which === "local" ? local : proxy, which === "local" ? "in-process" : "engine process", run));
                const inProcess = pair.find((item) => item.path === "in-process")!;
                const behind = pair.find((item) => item.path === "engine process")!;
                ratios.push({
                    decode: behind.tokensPerSecond / inProcess.tokensPerSecond,
                    firstToken: behind.firstTokenMs / inProcess.firstTokenMs
                });
                runs.push(...pair);
                options.onProgress?.(`${run.label} ${index + 1}/${options.repeats}`);
            }
            all.push(...runs);
            const of = (name: ProcessBenchRun["path"]) => runs.filter((item) => item.path === name);
            rows.push({
                label: run.label,
                inProcess: {
                    tokensPerSecond: median(of("in-process").map((item) => item.tokensPerSecond)),
                    firstTokenMs: median(of("in-process").map((item) => item.firstTokenMs))
                },
                engineProcess: {
                    tokensPerSecond: median(of("engine process").map((item) => item.tokensPerSecond)),
                    firstTokenMs: median(of("engine process").map((item) => item.firstTokenMs))
                },
                decodeRatio: median(ratios.map((ratio) => ratio.decode)),
                firstTokenRatio: median(ratios.map((ratio) => ratio.firstToken))
            });
        }

        // Killed as the out-of-memory killer would: to the model loaded again in a new engine process.
        const restartMs: number[] = [];
        for (let index = 0; index < options.restarts; index++) {
            const before = proxy.restarts;
            process.kill(proxy.pid!, "SIGKILL");
            while (proxy.restarts === before || proxy.status.state !== "ready") await new Promise((resolve) => setTimeout(resolve, 5));
            restartMs.push(proxy.lastRestartMs!);
            options.onProgress?.(`restart ${index + 1}/${options.restarts}: ${proxy.lastRestartMs!.toFixed(0)} ms`);
        }
        return {rows, runs: all, coldStartMs, restartMs, restartMedianMs: median(restartMs)};
    } finally {
        await proxy.dispose();
        await local.dispose();
    }
}

/** The engine process's script as the app and headless mode start it (built by `npm run build`). */
export function builtEngineEntry(): string {
    const entry = path.resolve(import.meta.dirname, "../../out/main/engineProcess.js");
    if (!fs.existsSync(entry)) throw new Error(`${entry} is missing: run npm run build first`);
    return entry;
}

export function processRuns(cells: {full: number; pruned: number}) {
    return [
        {label: "Full KV", compression: {...defaultCompressionSettings, policy: "full" as const}, cells: cells.full},
        {label: "Lethe", compression: {...defaultCompressionSettings, policy: "lethe" as const}, cells: cells.pruned}
    ];
}
