// A model split across this machine and two llama.cpp rpc-servers on loopback (the rpc-server of the engine build,
// native/patches/0009), with the engine in its own process as the app runs it: the split model answers token for token
// as the local one, greedy, under Full and under a pruning policy, for the demo model (llama) and the merge model
// (qwen3: per-head q/k norm, grouped-query attention); a server killed mid-answer ends the answer with an error naming
// it, and the engine comes back on what is left.
import {spawn} from "node:child_process";
import path from "node:path";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import type {CompressionSettings, EngineStatus, PolicyId} from "../../preload/contract.js";
import {EngineProxy} from "../../main/engine/host/EngineProxy.js";
import {probeRpcServer} from "../../main/engine/rpc/probeRpcServer.js";
import {inspectModel} from "../../main/engine/runtime/inspectModel.js";
import {heldOutDemoProblems} from "../eval/demoTask.js";
import {heldOutMergeProblems} from "../eval/mergeTask.js";
import {REPO_ROOT} from "../fixtures/gguf/fixtures.js";
import {freePort, startRpcServer, type RpcServerProcess} from "../fixtures/rpcServers.js";
import {spawnTestEngine, until} from "./spawnTestEngine.js";
import {greedyAnswer} from "./greedyAnswer.js";

const demoModel = path.join(REPO_ROOT, "resources", "models", "ponder-demo.gguf");
const mergeModel = path.join(REPO_ROOT, "resources", "models", "ponder-merge.gguf");
const problem = heldOutDemoProblems(1, {minSteps: 20, maxSteps: 30}, 77)[0]!;
const mergeProblem = heldOutMergeProblems(1, {minItems: 24, maxItems: 30}, 77)[0]!;

async function answer(
    engine: EngineProxy,
    policy: PolicyId,
    cells: number,
    onChunk: (text: string) => void = () => {},
    question = problem.question,
    compression?: Partial<CompressionSettings>
) {
    const run = await greedyAnswer(engine, question, policy, cells, {maxTokens: 1024, onChunk, compression});
    return {text: run.text, used: run.promptTokens + run.tokens, stopReason: run.stopReason};
}

describe("a model split across two rpc-servers", () => {
    const servers: RpcServerProcess[] = [];
    const engines: EngineProxy[] = [];
    let layers: number;

    beforeAll(async () => {
        servers.push(await startRpcServer(), await startRpcServer());
        layers = (await inspectModel(demoModel)).layers!;
    });
    afterAll(async () => {
        await Promise.all(engines.map((engine) => engine.dispose()));
        for (const server of servers) server.child.kill("SIGKILL");
    });

    function engine(rpcServers: string[]): EngineProxy {
        const proxy = new EngineProxy({spawn: spawnTestEngine(), runtime: {build: "cpu", rpcServers}});
        engines.push(proxy);
        return proxy;
    }

    it("answers token for token as the local model, greedy, under Full and under pruning policies (Lethe's scores, TRIM-KV's gates)", async () => {
        const local = engine([]);
        await local.loadModel(demoModel, null);
        const full = await answer(local, "full", 4096);
        const cells = Math.ceil(full.used / 2);
        const pruned = await answer(local, "lethe", cells);
        expect(pruned.used).toBeGreaterThan(cells);

        const split = engine(servers.map((server) => server.endpoint));
        const build = await split.start();
        expect(build.rpc?.servers.map((server) => [server.endpoint, server.connected])).toEqual(
            servers.map((server) => [server.endpoint, true])
        );
        expect(build.rpc?.protocol).toMatch(/^\d+\.\d+\.\d+$/);
        // llama.cpp offloads the last n of the repeating layers plus the output layer: the first two layers stay here.
        await split.loadModel(demoModel, null, {gpuLayers: layers - 1});
        expect(await answer(split, "full", 4096)).toEqual(full);
        const placement = split.status.placement!;
        expect(placement.layers).toHaveLength(layers);
        expect(placement.layers.slice(0, 2)).toEqual(["CPU", "CPU"]);
        const remote = new Set(placement.devices.filter((device) => device.where != null).map((device) => device.where));
        expect(remote).toEqual(new Set(servers.map((server) => server.endpoint)));
        expect(
            [...placement.layers.slice(2), placement.output].every(
                (name) => placement.devices.find((device) => device.name === name)?.where != null
            )
        ).toBe(true);

        // The pruning policies' scores and retention gates come back from the remote layers: the same evictions, the same thought.
        expect(await answer(split, "lethe", cells)).toEqual(pruned);
        const gated = await answer(local, "trimkv", cells);
        expect(await answer(split, "trimkv", cells)).toEqual(gated);
    });

    it("ends an answer with an error naming a server killed under it, and comes back on what is left", async () => {
        const local = engines[0]!;
        const split = engines[1]!;
        const statuses: EngineStatus[] = [];
        split.onStatus((status) => statuses.push(status));
        let chunks = 0;
        const lost = servers[1]!;
        const pending = answer(split, "full", 4096, () => {
            if (++chunks === 20) lost.child.kill("SIGKILL");
        });
        await expect(pending).rejects.toMatchObject({
            code: "ENGINE_STOPPED",
            message: expect.stringContaining(`The RPC server ${lost.endpoint} stopped answering (connection refused`)
        });
        await until(() => split.status.state === "ready" && split.inspection != null, 120_000, "the engine to come back");
        const build = split.status.build!;
        expect(build.rpc?.servers.find((server) => server.endpoint === lost.endpoint)).toMatchObject({
            connected: false,
            error: expect.stringMatching(/connection refused/)
        });
        expect(statuses.some((status) => status.message?.includes(`RPC server not used: ${lost.endpoint}`))).toBe(true);
        // It answers again, on this machine and the server left, as the local model does.
        const again = await answer(split, "full", 4096);
        expect(again).toEqual(await answer(local, "full", 4096));
        expect(new Set(split.status.placement!.devices.map((device) => device.where))).toEqual(new Set([null, servers[0]!.endpoint]));
    });

    it("npm run rpc-server starts the engine build's rpc-server on loopback, and stops it with a signal", async () => {
        const port = await freePort();
        const output: string[] = [];
        const script = spawn(
            process.execPath,
            [path.join(REPO_ROOT, "native", "rpcServer.mjs"), "--port", String(port), "--threads", "1"],
            {stdio: ["ignore", "pipe", "pipe"]}
        );
        script.stdout!.on("data", (chunk: Buffer) => output.push(chunk.toString()));
        script.stderr!.on("data", (chunk: Buffer) => output.push(chunk.toString()));
        const exited = new Promise<number | null>((resolve) => script.on("exit", (code) => resolve(code)));
        let probe = await probeRpcServer(`127.0.0.1:${port}`, {timeoutMs: 500});
        for (let tries = 0; !probe.ok && tries < 100; tries++) {
            await new Promise((resolve) => setTimeout(resolve, 100));
            probe = await probeRpcServer(`127.0.0.1:${port}`, {timeoutMs: 500});
        }
        expect(probe.ok, output.join("")).toBe(true);
        expect(output.join("")).toMatch(/listening on this machine only/);
        script.kill("SIGTERM");
        await exited;
        const after = await probeRpcServer(`127.0.0.1:${port}`, {timeoutMs: 500});
        expect(after.ok).toBe(false);

        const bad = spawn(process.execPath, [path.join(REPO_ROOT, "native", "rpcServer.mjs"), "--port", "99999"], {
            stdio: ["ignore", "pipe", "pipe"]
        });
        const said: string[] = [];
        bad.stderr!.on("data", (chunk: Buffer) => said.push(chunk.toString()));
        expect(await new Promise((resolve) => bad.on("exit", resolve))).toBe(2);
        expect(said.join("")).toMatch(/--port must be 1 to 65535/);
    });

    it("splits the merge model too (q/k norm, grouped-query attention): the same tokens under Full, Lethe, TRIM-KV on shared and per-head cells, and H2O per head", async () => {
        const merge = (engine: EngineProxy, policy: PolicyId, cells: number, compression?: Partial<CompressionSettings>) =>
            answer(engine, policy, cells, undefined, mergeProblem.question, compression);
        // servers of its own: the tests above leave theirs with connections and one killed
        const own = [await startRpcServer(), await startRpcServer()];
        const local = engine([]);
        const split = engine(own.map((server) => server.endpoint));
        try {
            await local.loadModel(mergeModel, null);
            const full = await merge(local, "full", 4096);
            const cells = Math.ceil(full.used / 2);
            const pruned = await merge(local, "lethe", cells);
            expect(pruned.used).toBeGreaterThan(cells);
            await split.start();
            const mergeLayers = (await inspectModel(mergeModel)).layers!;
            await split.loadModel(mergeModel, null, {gpuLayers: mergeLayers - 1});
            expect(await merge(split, "full", 4096)).toEqual(full);
            expect(split.status.placement!.layers.slice(0, 2)).toEqual(["CPU", "CPU"]);
            expect(await merge(split, "lethe", cells)).toEqual(pruned);
            // its gates (made by the calibration) come back from the remote layers too, on shared cells and on per-head
            // cells (each KV head's K, V and kept values moved between cells in the remote layers' buffers)
            for (const combine of ["aggregate", "heads"] as const)
                expect(await merge(split, "trimkv", cells, {combine})).toEqual(await merge(local, "trimkv", cells, {combine}));
            // per H2O's KV heads too: the scores of a remote layer's heads move with them
            expect(await merge(split, "h2o", cells, {combine: "heads"})).toEqual(await merge(local, "h2o", cells, {combine: "heads"}));
        } finally {
            engines.splice(engines.indexOf(local), 2);
            await Promise.all([local.dispose(), split.dispose()]);
            for (const server of own) server.child.kill("SIGKILL");
        }
    });
});
