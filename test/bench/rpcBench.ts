// The `rpc` suite: a model split across two llama.cpp rpc-servers on loopback (the engine build's own, native/patches/0009)
// against the same model on this machine, each in an engine process as the app runs it, same run: decode speed and time to
// the first token. One machine talking to itself: the floor of what the network costs, not a second machine's speed.
import path from "node:path";
import type {CompressionSettings} from "../../preload/contract.js";
import type {EngineApi} from "../../main/engine/EngineApi.js";
import {EngineProxy} from "../../main/engine/host/EngineProxy.js";
import {forkEngine} from "../../main/engine/host/forkEngine.js";
import {startRpcServer} from "../fixtures/rpcServers.js";
import {median} from "./median.js";
import {table} from "./plot.js";

export type RpcBenchRow = {
    model: string;
    policy: string;
    cells: number;
    local: {tokensPerSecond: number; firstTokenMs: number};
    split: {tokensPerSecond: number; firstTokenMs: number};
    /** Medians of the per-pair ratios: split / local. */
    decodeRatio: number;
    firstTokenRatio: number;
    /** Whether every split answer was token for token the local one (greedy). */
    identical: boolean;
};

/**
 * For each model and run: one engine process on this machine, one with every layer on two rpc-servers (GPU layers
 * "max": half the layers on each, the output layer on the second), warmed up once, then `repeats` pairs back to back
 * in alternating order.
 */
export async function rpcSuite(options: {
    models: {label: string; path: string}[];
    runs: Array<{label: string; compression: CompressionSettings; cells: number}>;
    threads: number;
    repeats: number;
    maxTokens: number;
    question: string;
    onProgress?: (line: string) => void;
}): Promise<{rows: RpcBenchRow[]; table: string}> {
    const servers = [await startRpcServer({threads: options.threads}), await startRpcServer({threads: options.threads})];
    const spawnEngine = forkEngine({
        entry: path.resolve(import.meta.dirname, "../../main/engineProcess.ts"),
        execArgv: ["--import", "tsx"],
        args: [`--threads=${options.threads}`]
    });
    const local = new EngineProxy({spawn: spawnEngine, runtime: {build: "cpu"}});
    const split = new EngineProxy({spawn: spawnEngine, runtime: {build: "cpu", rpcServers: servers.map((server) => server.endpoint)}});
    const rows: RpcBenchRow[] = [];
    try {
        for (const model of options.models) {
            await local.loadModel(model.path, null);
            await split.loadModel(model.path, null, {gpuLayers: "max"});
            // `tag` makes the system prompt: the two of a pair read the same tokens, and nothing is reused from an earlier prompt.
            const generate = async (engine: EngineApi, run: (typeof options.runs)[number], tag: string) => {
                const started = performance.now();
                let first: number | null = null;
                let firstTokens = 0;
                let last = started;
                let tokens = 0;
                let text = "";
                await engine.generate({
                    history: [{role: "user", text: options.question}],
                    systemPrompt: `Request ${tag}.`,
                    temperature: 0,
                    maxTokens: options.maxTokens,
                    signal: new AbortController().signal,
                    kv: {compression: run.compression, cells: run.cells},
                    onChunk(chunk) {
                        const now = performance.now();
                        if (first == null) {
                            first = now;
                            firstTokens = chunk.tokens;
                        }
                        last = now;
                        tokens += chunk.tokens;
                        text += chunk.text;
                    }
                });
                return {
                    firstTokenMs: (first ?? last) - started,
                    tokensPerSecond: (tokens - firstTokens) / ((last - (first ?? last)) / 1000),
                    text
                };
            };
            for (const run of options.runs) {
                await generate(local, run, `${run.label} warm-up`);
                await generate(split, run, `${run.label} warm-up`);
                const pairs: {local: Awaited<ReturnType<typeof generate>>; split: Awaited<ReturnType<typeof generate>>}[] = [];
                for (let index = 0; index < options.repeats; index++) {
                    const tag = `${run.label} ${String(index).padStart(3, "0")}`;
                    if (index % 2 === 0) {
                        const first = await generate(local, run, tag);
                        pairs.push({local: first, split: await generate(split, run, tag)});
                    } else {
                        const first = await generate(split, run, tag);
                        pairs.push({split: first, local: await generate(local, run, tag)});
                    }
                    options.onProgress?.(`${model.label} ${run.label} ${index + 1}/${options.repeats}`);
                }
                rows.push({
                    model: model.label,
                    policy: run.label,
                    cells: run.cells,
                    local: {
                        tokensPerSecond: median(pairs.map((pair) => pair.local.tokensPerSecond)),
                        firstTokenMs: median(pairs.map((pair) => pair.local.firstTokenMs))
                    },
                    split: {
                        tokensPerSecond: median(pairs.map((pair) => pair.split.tokensPerSecond)),
                        firstTokenMs: median(pairs.map((pair) => pair.split.firstTokenMs))
                    },
                    decodeRatio: median(pairs.map((pair) => pair.split.tokensPerSecond / pair.local.tokensPerSecond)),
                    firstTokenRatio: median(pairs.map((pair) => pair.split.firstTokenMs / pair.local.firstTokenMs)),
                    identical: pairs.every((pair) => pair.split.text === pair.local.text)
                });
            }
        }
    } finally {
        await split.dispose();
        await local.dispose();
        for (const server of servers) server.child.kill("SIGKILL");
    }
    return {
        rows,
        table: table(
            [
                "model",
                "policy (cells)",
                "local decode tok/s",
                "split decode tok/s",
                "ratio",
                "local first token (ms)",
                "split first token (ms)",
                "ratio",
                "same tokens"
            ],
            rows.map((row) => [
                row.model,
                `${row.policy} (${row.cells})`,
                row.local.tokensPerSecond.toFixed(1),
                row.split.tokensPerSecond.toFixed(1),
                row.decodeRatio.toFixed(3),
                row.local.firstTokenMs.toFixed(0),
                row.split.firstTokenMs.toFixed(0),
                row.firstTokenRatio.toFixed(3),
                row.identical ? "yes" : "no"
            ])
        )
    };
}
