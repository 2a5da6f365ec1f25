// The RPC servers of the engine settings: stored, checked on add (a server that fails its check is kept unused, with
// the reason), the engine process restarted with the enabled ones, malformed requests refused; and an engine process
// that ends while it uses a server is answered with an error naming the server that stopped, and comes back without it.
import {describe, expect, it} from "vitest";
import type {ModelInfo} from "../../../preload/contract.js";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {EngineProxy} from "../../../main/engine/host/EngineProxy.js";
import type {RpcProbe} from "../../../main/engine/rpc/probeRpcServer.js";
import {createDispatch} from "../../../main/ipc/dispatch.js";
import {createHandlers} from "../../../main/ipc/handlers.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {readRuntimeOptions} from "../../../main/services/RpcServerService.js";
import type {GenerateRequest} from "../../../main/engine/EngineApi.js";
import {memoryEngines, until} from "./memoryEngines.js";

const model: ModelInfo = {
    id: "m",
    path: "/models/m.gguf",
    name: "m",
    sizeBytes: 1,
    architecture: "llama",
    contextLength: 4096,
    addedAt: 0,
    lastUsedAt: null,
    crashedAt: null
};

/** Servers that answer (`up`) or refuse the connection; every probe is recorded. */
function fakeNetwork(up: Set<string>) {
    const probed: string[] = [];
    const probe = async (endpoint: string): Promise<RpcProbe> => {
        probed.push(endpoint);
        return up.has(endpoint)
            ? {
                  endpoint,
                  ok: true,
                  protocol: {major: 7, minor: 0, patch: 0},
                  devices: [{index: 0, freeBytes: 4 << 30, totalBytes: 8 << 30}],
                  ms: 1
              }
            : {endpoint, ok: false, protocol: null, error: "connection refused (no rpc-server listens there)"};
    };
    return {probe, probed};
}

function setup(up: Set<string>) {
    const network = fakeNetwork(up);
    const {children, spawn} = memoryEngines();
    const db = new AppDatabase(":memory:");
    const proxy = new EngineProxy({spawn, runtime: readRuntimeOptions(db), probeRpcServer: network.probe});
    const services = new AppServices(db, proxy, () => {}, {
        version: "t",
        modelsDir: "/tmp/ponder-test-models",
        rpcServers: {probe: network.probe},
        engineBuilds: {
            list: async () => [{backend: "cpu", folder: "linux-x64", usable: true, reason: null, config: "portable", builtAt: null}],
            platform: "linux"
        }
    });
    return {children, db, proxy, services, network};
}

describe("the RPC servers setting", () => {
    it("checks a server on add, uses it (the engine restarts with it and loads the model again), and stops using it", async () => {
        const {children, db, proxy, services, network} = setup(new Set(["127.0.0.1:50052"]));
        await proxy.start();
        await proxy.loadModel(model.path, model);
        expect(children[0]!.runtime.rpcServers).toEqual([]);

        const added = await services.rpcServers.add(" 127.0.0.1:50052 ");
        expect(network.probed).toEqual(["127.0.0.1:50052"]);
        expect(added.servers).toMatchObject([
            {
                endpoint: "127.0.0.1:50052",
                enabled: true,
                warning: null,
                check: {ok: true, protocol: "7.0.0", devices: [{freeBytes: 4 << 30}]}
            }
        ]);
        expect(children).toHaveLength(2);
        expect(children[0]!.alive).toBe(false);
        expect(children[1]!.runtime).toEqual({build: "auto", rpcServers: ["127.0.0.1:50052"]});
        expect(children[1]!.engine.paths).toEqual([model.path]);
        expect(readRuntimeOptions(db)).toEqual({build: "auto", rpcServers: ["127.0.0.1:50052"]});

        // The engine-build setting keeps the servers.
        await services.engineBuilds.set("cpu");
        expect(children.at(-1)!.runtime).toEqual({build: "cpu", rpcServers: ["127.0.0.1:50052"]});

        await services.rpcServers.setEnabled("127.0.0.1:50052", false);
        expect(children.at(-1)!.runtime).toEqual({build: "cpu", rpcServers: []});
        expect((await services.rpcServers.remove("127.0.0.1:50052")).servers).toEqual([]);
        await expect(services.rpcServers.remove("127.0.0.1:50052")).rejects.toMatchObject({code: "NOT_FOUND"});
        await services.dispose();
    });

    it("keeps a server that fails its check unused, with the reason, and refuses to use it until it answers", async () => {
        const up = new Set<string>();
        const {children, proxy, services} = setup(up);
        await proxy.start();
        const added = await services.rpcServers.add("10.1.2.3:50052");
        expect(added.servers).toMatchObject([
            {endpoint: "10.1.2.3:50052", enabled: false, check: {ok: false, error: expect.stringMatching(/connection refused/)}}
        ]);
        expect(added.servers[0]!.warning).toMatch(/no authentication/);
        expect(children).toHaveLength(1);
        await expect(services.rpcServers.setEnabled("10.1.2.3:50052", true)).rejects.toMatchObject({
            code: "BAD_REQUEST",
            message: expect.stringMatching(/cannot be used: connection refused/)
        });
        await expect(services.rpcServers.add("10.1.2.3:50052")).rejects.toMatchObject({
            code: "BAD_REQUEST",
            message: expect.stringMatching(/already in the list/)
        });
        up.add("10.1.2.3:50052");
        expect((await services.rpcServers.check("10.1.2.3:50052")).servers[0]!.check).toMatchObject({ok: true});
        await services.rpcServers.setEnabled("10.1.2.3:50052", true);
        expect(children.at(-1)!.runtime.rpcServers).toEqual(["10.1.2.3:50052"]);
        await services.dispose();
    });

    it("refuses malformed requests with a clear error, and a damaged stored list reads as none", async () => {
        const {db, services} = setup(new Set());
        const dispatch = createDispatch(createHandlers(services, {openExternal: async () => {}, pickModelFile: async () => null}));
        for (const [channel, payload] of [
            ["rpc:add", {}],
            ["rpc:add", {endpoint: 5}],
            ["rpc:add", {endpoint: "x".repeat(400)}],
            ["rpc:setEnabled", {endpoint: "a:1"}],
            ["rpc:remove", "a:1"],
            ["rpc:list", {extra: 1}]
        ] as const) {
            expect(await dispatch(channel, payload as never), channel).toMatchObject({ok: false, error: {code: "BAD_REQUEST"}});
        }
        for (const endpoint of ["nohost", "a:99999", "[::1]:50052", "a b:1"])
            expect(await dispatch("rpc:add", {endpoint}), endpoint).toMatchObject({ok: false, error: {code: "BAD_REQUEST"}});
        expect(await dispatch("rpc:list", undefined)).toMatchObject({ok: true, value: {servers: []}});
        db.settings.set("rpcServers", {servers: "everything"});
        expect(readRuntimeOptions(db).rpcServers).toEqual([]);
        db.settings.set("rpcServers", {
            servers: [
                {endpoint: "not an endpoint", enabled: true},
                {endpoint: "192.168.0.9:50052", enabled: true}
            ]
        });
        expect(readRuntimeOptions(db).rpcServers).toEqual(["192.168.0.9:50052"]);
        await services.dispose();
    });
});

describe("an engine process that ends while it uses rpc-servers", () => {
    it("names the server that stopped in the answer's error, and restarts with the model", async () => {
        const up = new Set(["127.0.0.1:50052", "127.0.0.1:50053"]);
        const network = fakeNetwork(up);
        const {children, spawn} = memoryEngines((engine) => (engine.thought = Array.from({length: 400}, () => " x")));
        const proxy = new EngineProxy({spawn, runtime: {build: "auto", rpcServers: [...up]}, probeRpcServer: network.probe});
        await proxy.loadModel(model.path, model);
        const chunks: string[] = [];
        const request: GenerateRequest = {
            history: [{role: "user", text: "2+2?"}],
            systemPrompt: "",
            temperature: 0,
            maxTokens: 1000,
            signal: new AbortController().signal,
            kv: {
                compression: {policy: "full", budget: {kind: "cells", cells: 512}, kvType: "f16", flashAttention: false} as never,
                cells: 512
            },
            onChunk: (chunk) => chunks.push(chunk.text)
        };
        const answer = proxy.generate(request);
        await until(() => chunks.length > 2);
        up.delete("127.0.0.1:50053");
        children[0]!.die({code: null, signal: "SIGABRT"});
        await expect(answer).rejects.toMatchObject({
            code: "ENGINE_STOPPED",
            message: expect.stringMatching(
                /^The RPC server 127\.0\.0\.1:50053 stopped answering \(connection refused.*\), which ended the engine process \(The engine process aborted/
            )
        });
        expect(network.probed).toEqual(expect.arrayContaining(["127.0.0.1:50052", "127.0.0.1:50053"]));
        await until(() => children.length === 2 && proxy.status.state === "ready");
        expect(children[1]!.engine.paths).toEqual([model.path]);
        expect(proxy.status.message).toMatch(/^The RPC server 127\.0\.0\.1:50053 stopped answering.*so it was restarted in/);
        await proxy.dispose();
    });

    it("does not take a load a lost server interrupted for a model that crashes the engine", async () => {
        const up = new Set(["127.0.0.1:50052"]);
        const network = fakeNetwork(up);
        const crashed: string[] = [];
        const {children, spawn} = memoryEngines((engine) => (engine.loadMs = 200));
        const proxy = new EngineProxy({
            spawn,
            runtime: {rpcServers: [...up]},
            probeRpcServer: network.probe,
            onModelCrashed: (info) => crashed.push(info.id)
        });
        const loading = proxy.loadModel(model.path, model);
        await until(() => children[0]?.engine.paths.length === 1);
        up.clear();
        children[0]!.die({code: null, signal: "SIGABRT"});
        await expect(loading).rejects.toMatchObject({message: expect.stringMatching(/RPC server 127\.0\.0\.1:50052 stopped answering/)});
        await until(() => children.length === 2 && proxy.status.state === "ready");
        expect(crashed).toEqual([]);
        expect(children[1]!.engine.paths).toEqual([model.path]);
        await proxy.dispose();
    });
});
