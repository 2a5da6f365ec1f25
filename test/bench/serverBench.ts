import os from "node:os";
import path from "node:path";
import type {Llama} from "node-llama-cpp";
import {fork} from "node:child_process";
import type {BuildInfo, PolicyId, ServerRequestLog} from "../../preload/contract.js";
import {Engine} from "../../main/engine/runtime/Engine.js";
import type {EngineApi} from "../../main/engine/EngineApi.js";
import {resolveKv} from "../../main/kv/resolveKv.js";
import {ApiServer} from "../../main/server/ApiServer.js";
import {CompletionService} from "../../main/services/CompletionService.js";
import {GenerationQueue} from "../../main/services/GenerationQueue.js";
import {defaultAppSettings, defaultCompressionSettings} from "../../main/services/schemas.js";
import {heldOutDemoProblems} from "../eval/demoTask.js";
import type {ClientRequest, ClientTiming} from "./serverClient.js";
import {median} from "./median.js";

type ServerBenchRun = {
    path: "engine" | "server";
    firstTokenMs: number;
    tokensPerSecond: number;
    tokens: number;
    /** Server runs: the engine's decode speed inside the server, timed where the tokens are made (no delivery to the client). */
    serverSideTokensPerSecond?: number;
};

/** One timed generation: time to the first token from the call, then decode speed over the tokens after it. */
type Timing = {started: number; first: number | null; last: number; tokens: number};

function summarise(pathName: ServerBenchRun["path"], timing: Timing): ServerBenchRun {
    const first = timing.first ?? timing.last;
    return {
        path: pathName,
        firstTokenMs: first - timing.started,
        tokensPerSecond: (timing.tokens - 1) / ((timing.last - first) / 1000),
        tokens: timing.tokens
    };
}

/**
 * The API server against the engine called directly, in the same process, on the same engine and model: greedy
 * generations of the same demo problems, alternating the two paths. Each generation gets its own system prompt so
 * neither reuses the other's prompt from the context: both evaluate the whole prompt.
 */
export async function serverSuite(options: {
    llama: Llama;
    build: BuildInfo;
    modelPath: string;
    threads: number;
    repeats: number;
    maxTokens: number;
    policy: PolicyId;
    cells: number;
    onProgress?: (line: string) => void;
    /** The engine both paths call; defaults to one in this process. */
    engine?: EngineApi;
}) {
    const engine =
        options.engine ??
        new Engine({loadLlama: async () => ({llama: options.llama, build: options.build}), threads: options.threads, ownsRuntime: false});
    // The server's own parts (the app's composition without its database): the queue, the completion service, the HTTP edge.
    const completions = new CompletionService(
        engine,
        new GenerationQueue(4),
        {resolve: async (compression) => resolveKv(engine.inspection!, compression, os.freemem())},
        {get: () => defaultAppSettings},
        Date.now
    );
    const model = path.basename(options.modelPath).replace(/\.gguf$/, "");
    let server: ApiServer | null = null;
    let lastLogged: ServerRequestLog | null = null;
    // The client runs in its own process, as a program calling the server does: its parsing is not the server's cost.
    const clientProcess = fork(path.join(import.meta.dirname, "serverClient.ts"), {execArgv: ["--import", "tsx"], stdio: "inherit"});
    let pending: {resolve: (timing: ClientTiming) => void; reject: (err: Error) => void} | null = null;
    clientProcess.on("message", (timing) => pending?.resolve(timing as ClientTiming));
    clientProcess.on("exit", (code) => pending?.reject(new Error(`The benchmark client exited with ${code}`)));
    const ask = (request: ClientRequest) =>
        new Promise<ClientTiming>((resolve, reject) => {
            pending = {resolve, reject};
            clientProcess.send(request);
        });
    try {
        await engine.loadModel(options.modelPath, null);
        server = await ApiServer.start({
            keyHash: null,
            onLog: (entry) => {
                if (entry.state === "done") lastLogged = entry;
            },
            backend: {
                model: () => ({id: model, createdAt: 0}),
                defaults: () => ({
                    policy: options.policy,
                    budget: {kind: "cells", cells: options.cells},
                    temperature: 0,
                    maxTokens: options.maxTokens
                }),
                complete: (request) => completions.complete(request)
            }
        });
        const baseURL = server.url;
        const problems = heldOutDemoProblems(options.repeats, {minSteps: 40, maxSteps: 50}, 3000);
        const compression = {...defaultCompressionSettings, policy: options.policy};
        let request = 0;

        const direct = async (question: string): Promise<ServerBenchRun> => {
            const timing: Timing = {started: performance.now(), first: null, last: 0, tokens: 0};
            await engine.generate({
                history: [{role: "user", text: question}],
                systemPrompt: `Request ${String(request++).padStart(3, "0")}.`,
                temperature: 0,
                maxTokens: options.maxTokens,
                signal: new AbortController().signal,
                kv: {compression, cells: options.cells},
                // Memory readings as the app's chat and the server take them.
                onSample() {},
                onChunk(chunk) {
                    const now = performance.now();
                    timing.first ??= now;
                    timing.last = now;
                    timing.tokens += chunk.tokens;
                }
            });
            return summarise("engine", timing);
        };
        const served = async (question: string): Promise<ServerBenchRun> => {
            const timing = await ask({
                baseURL,
                model,
                system: `Request ${String(request++).padStart(3, "0")}.`,
                question,
                maxTokens: options.maxTokens
            });
            return {
                ...summarise("server", {started: 0, first: timing.firstTokenMs, last: timing.lastTokenMs, tokens: timing.tokens}),
                serverSideTokensPerSecond: lastLogged?.tokensPerSecond ?? undefined
            };
        };

        // One of each to warm up (first allocation of the context, JIT), not counted.
        await direct(problems[0]!.question);
        await served(problems[0]!.question);
        const runs: ServerBenchRun[] = [];
        // Per pair (the two paths back to back, under the same machine load): server over direct.
        const pairRatios: {decode: number; firstToken: number; serverSide: number}[] = [];
        for (const [index, problem] of problems.entries()) {
            const pair = index % 2 === 0 ? [direct, served] : [served, direct];
            const done: ServerBenchRun[] = [];
            for (const run of pair) done.push(await run(problem.question));
            runs.push(...done);
            const engineRun = done.find((run) => run.path === "engine")!;
            const serverRun = done.find((run) => run.path === "server")!;
            pairRatios.push({
                decode: serverRun.tokensPerSecond / engineRun.tokensPerSecond,
                firstToken: serverRun.firstTokenMs / engineRun.firstTokenMs,
                serverSide: (serverRun.serverSideTokensPerSecond ?? Number.NaN) / engineRun.tokensPerSecond
            });
            options.onProgress?.(`${index + 1}/${problems.length}`);
        }
        const of = (name: ServerBenchRun["path"]) => runs.filter((run) => run.path === name);
        const engineRuns = of("engine");
        const serverRuns = of("server");
        const summary = {
            engine: {
                tokensPerSecond: median(engineRuns.map((run) => run.tokensPerSecond)),
                firstTokenMs: median(engineRuns.map((run) => run.firstTokenMs))
            },
            server: {
                tokensPerSecond: median(serverRuns.map((run) => run.tokensPerSecond)),
                firstTokenMs: median(serverRuns.map((run) => run.firstTokenMs)),
                serverSideTokensPerSecond: median(serverRuns.map((run) => run.serverSideTokensPerSecond ?? Number.NaN))
            }
        };
        return {
            runs,
            summary,
            model,
            /** Median over pairs of server / direct decode speed. */
            decodeRatio: median(pairRatios.map((ratio) => ratio.decode)),
            firstTokenRatio: median(pairRatios.map((ratio) => ratio.firstToken)),
            serverSideDecodeRatio: median(pairRatios.map((ratio) => ratio.serverSide))
        };
    } finally {
        clientProcess.removeAllListeners("exit");
        clientProcess.kill();
        await server?.dispose();
        await engine.dispose();
    }
}
