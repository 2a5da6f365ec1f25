// The engine process's protocol and the proxy's recovery, with the engine process played in memory: a child whose
// messages go through structured cloning to `serveEngine` over a scripted engine, and which can "die" at any moment.
import fs from "node:fs";
import os from "node:os";
import {describe, expect, it} from "vitest";
import type {ModelInfo} from "../../../preload/contract.js";
import {EngineProxy} from "../../../main/engine/host/EngineProxy.js";
import type {GenerateRequest} from "../../../main/engine/EngineApi.js";
import {memoryEngines, until} from "./memoryEngines.js";

const info = (id: string): ModelInfo => ({
    id,
    path: `/models/${id}.gguf`,
    name: id,
    sizeBytes: 1,
    architecture: "llama",
    contextLength: 4096,
    addedAt: 0,
    lastUsedAt: null,
    crashedAt: null
});

function request(overrides: Partial<GenerateRequest> = {}): GenerateRequest & {chunks: string[]} {
    const chunks: string[] = [];
    return {
        history: [{role: "user", text: "2+2?"}],
        systemPrompt: "",
        temperature: 0,
        maxTokens: 100,
        signal: new AbortController().signal,
        kv: {compression: {policy: "full", budget: {kind: "cells", cells: 512}, kvType: "f16", flashAttention: false} as never, cells: 512},
        onChunk: (chunk) => chunks.push(chunk.text),
        chunks,
        ...overrides
    };
}

describe("the engine behind a process boundary", () => {
    it("runs calls in the engine process and streams an answer's chunks in batches, not one message per token", async () => {
        const {children, spawn} = memoryEngines((engine) => {
            engine.thought = Array.from({length: 60}, (_, i) => ` t${i}`);
            engine.answer = ["The", " answer", " is", " 4"];
        });
        const proxy = new EngineProxy({spawn});
        const model = info("a");
        const inspection = await proxy.loadModel(model.path, model);
        expect(inspection.path).toBe(model.path);
        expect(proxy.inspection?.path).toBe(model.path);
        expect(proxy.status.model?.id).toBe("a");

        const req = request();
        const result = await proxy.generate(req);
        expect(result.stopReason).toBe("eogToken");
        expect(req.chunks.join("")).toBe(Array.from({length: 60}, (_, i) => ` t${i}`).join("") + "The answer is 4");
        const chunkMessages = children[0]!.received.filter((message) => message.type === "chunks").length;
        // 64 tokens at about a millisecond each: a handful of batches.
        expect(chunkMessages).toBeGreaterThan(0);
        expect(chunkMessages).toBeLessThan(20);
        await proxy.dispose();
        expect(children[0]!.alive).toBe(false);
    });

    it("stops a generation in the engine process when its signal aborts", async () => {
        const {children, spawn} = memoryEngines((engine) => (engine.thought = Array.from({length: 500}, () => " x")));
        const proxy = new EngineProxy({spawn});
        await proxy.loadModel("/models/a.gguf", info("a"));
        const abort = new AbortController();
        const req = request({signal: abort.signal});
        const pending = proxy.generate(req);
        await until(() => req.chunks.length > 3);
        abort.abort();
        expect((await pending).stopReason).toBe("abort");
        expect(children[0]!.sent.some((message) => message.type === "abort")).toBe(true);
        expect(req.chunks.length).toBeLessThan(500);
        await proxy.dispose();
    });

    it("ends an engine that does not honour a stop in time: the answer stops, the engine restarts with its model", async () => {
        const {children, spawn} = memoryEngines();
        const proxy = new EngineProxy({spawn, stopGraceMs: 40});
        await proxy.loadModel("/models/a.gguf", info("a"));
        // Stuck in native code: chunks came, then nothing, and the abort is never heard.
        children[0]!.engine.generate = async (request) => {
            request.onChunk({segment: "thought", text: "stuck", tokens: 1});
            return new Promise(() => {});
        };
        const abort = new AbortController();
        const req = request({signal: abort.signal});
        const pending = proxy.generate(req);
        await until(() => req.chunks.length === 1);
        const stopped = Date.now();
        abort.abort();
        expect(await pending).toEqual({stopReason: "abort", promptTokens: 0});
        expect(Date.now() - stopped).toBeLessThan(1000);
        expect(children[0]!.alive).toBe(false);
        await until(() => proxy.status.state === "ready" && proxy.restarts === 1);
        expect(proxy.status.message).toMatch(/did not stop within 0\.0 s of a stop, so its process was ended, so it was restarted/);
        expect(children[1]!.engine.paths).toEqual(["/models/a.gguf"]);
        await proxy.dispose();
    });

    it("fails an answer with ENGINE_STOPPED when the engine dies under it, keeps what arrived, and restarts with the model", async () => {
        const {children, spawn} = memoryEngines((engine) => (engine.thought = Array.from({length: 500}, () => " x")));
        const proxy = new EngineProxy({spawn});
        await proxy.start();
        await proxy.loadModel("/models/a.gguf", info("a"));
        const req = request();
        const pending = proxy.generate(req);
        await until(() => req.chunks.length > 5);
        children[0]!.die({code: null, signal: "SIGABRT"});
        const error = (await pending.catch((err: unknown) => err)) as {code?: string; message?: string};
        expect(error.code).toBe("ENGINE_STOPPED");
        expect(error.message).toMatch(/aborted \(SIGABRT/);
        expect(req.chunks.length).toBeGreaterThan(5);

        // The status says what happened at once, then the engine comes back with the same model.
        expect(proxy.status.state).toBe("loading");
        expect(proxy.status.message).toMatch(/SIGABRT.*restarting it with a/);
        await until(() => proxy.status.state === "ready" && proxy.restarts === 1);
        expect(children).toHaveLength(2);
        expect(children[1]!.engine.paths).toEqual(["/models/a.gguf"]);
        expect(proxy.status.message).toMatch(/restarted in \d+\.\d s with a/);
        expect(proxy.inspection?.path).toBe("/models/a.gguf");
        // A later status of the engine's own, with nothing to say, keeps the note.
        const statuses = () => children[1]!.received.filter((message) => message.type === "status").length;
        const before = statuses();
        children[1]!.engine.emitStatus();
        await until(() => statuses() === before + 1);
        await new Promise((resolve) => setTimeout(resolve, 5));
        expect(proxy.status.message).toMatch(/restarted in \d+\.\d s with a/);

        // The next answer works.
        children[1]!.engine.thought = ["ok"];
        const next = request();
        expect((await proxy.generate(next)).stopReason).toBe("eogToken");
        expect(next.chunks.join("")).toBe("okThe answer is 4");
        await proxy.dispose();
    });

    it("does not load again a model whose loading stopped the engine, and puts back the one that worked", async () => {
        const crashed: string[] = [];
        const {children, spawn} = memoryEngines((engine) => (engine.loadMs = 30));
        const proxy = new EngineProxy({spawn, onModelCrashed: (model) => crashed.push(model.id)});
        await proxy.loadModel("/models/good.gguf", info("good"));
        const load = proxy.loadModel("/models/bad.gguf", info("bad"));
        await until(() => children[0]!.engine.paths.length === 2);
        children[0]!.die({code: null, signal: "SIGSEGV"});
        const error = (await load.catch((err: unknown) => err)) as {code?: string; message?: string};
        expect(error.code).toBe("MODEL_INVALID");
        expect(error.message).toMatch(
            /Loading bad stopped the engine \(The engine process crashed \(SIGSEGV\)\): it is not loaded automatically again/
        );
        expect(crashed).toEqual(["bad"]);
        await until(() => proxy.status.state === "ready" && proxy.restarts === 1);
        expect(children[1]!.engine.paths).toEqual(["/models/good.gguf"]);
        expect(proxy.status.model?.id).toBe("good");
        await proxy.dispose();
    });

    it("gives up, with a status that says so, when the engine keeps dying while it restarts", async () => {
        const crashed: string[] = [];
        const {children, spawn} = memoryEngines((engine) => (engine.loadMs = 20));
        const proxy = new EngineProxy({spawn, onModelCrashed: (model) => crashed.push(model.id)});
        await proxy.start();
        await proxy.loadModel("/models/a.gguf", info("a"));
        children[0]!.die();
        // Each restart dies while loading the model: the model is marked and left out, then the proxy stops trying.
        await until(() => children.length === 2 && children[1]!.engine.paths.length === 1);
        children[1]!.die();
        expect(crashed).toEqual(["a"]);
        await until(() => children.length === 3 && children[2]!.sent.length === 1);
        children[2]!.die();
        await until(() => proxy.status.state === "error");
        expect(proxy.status.message).toMatch(/again while restarting: it was not restarted/);
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect(children).toHaveLength(3);

        // A person loading a model starts a fresh engine.
        await proxy.loadModel("/models/b.gguf", info("b"));
        expect(children).toHaveLength(4);
        expect(proxy.status.state).toBe("ready");
        await proxy.dispose();
    });

    it("says which file stopped the engine when reading a header did", async () => {
        // Reading this header never returns: the engine dies in it.
        const {children, spawn} = memoryEngines((engine) => (engine.inspect = () => new Promise(() => {})));
        const proxy = new EngineProxy({spawn});
        const inspecting = proxy.inspect("/models/hostile.gguf");
        await until(() => children.length === 1 && children[0]!.sent.length === 1);
        children[0]!.die({code: null, signal: "SIGABRT"});
        const error = (await inspecting.catch((err: unknown) => err)) as {code?: string; message?: string};
        expect(error.code).toBe("MODEL_INVALID");
        expect(error.message).toMatch(/hostile\.gguf could not be read: reading its header stopped the engine/);
        await until(() => proxy.restarts === 1);
        await proxy.dispose();
    });

    it("writes the state an answer left in the engine process when asked, and relays what became of it", async () => {
        const {children, spawn} = memoryEngines((engine) => (engine.deferStates = true));
        const proxy = new EngineProxy({spawn});
        const settled: unknown[] = [];
        proxy.onStateSettled((save) => settled.push(save));
        expect(await proxy.saveState()).toBeNull(); // no engine process yet: nothing is started for it
        await proxy.loadModel("/models/a.gguf", info("a"));
        const file = `${os.tmpdir()}/ponder-proxy-${process.pid}-${Date.now()}.state`;
        const result = await proxy.generate(request({states: {load: [], save: file}}));
        expect(result.states?.pending).toBe(file);
        expect(fs.existsSync(file)).toBe(false);
        expect(await proxy.saveState("/elsewhere.state")).toBeNull();
        const save = await proxy.saveState(file);
        expect(save).toMatchObject({path: file, saved: {bytes: 1000}, note: null});
        expect(settled).toEqual([save]);
        expect(children[0]!.received.some((message) => message.type === "stateSettled")).toBe(true);
        fs.rmSync(file, {force: true});
        await proxy.dispose();
    });

    it("writes the state an answer left in the engine process before a restart ends that process", async () => {
        const {children, spawn} = memoryEngines((engine) => (engine.deferStates = true));
        const proxy = new EngineProxy({spawn});
        const settled: unknown[] = [];
        proxy.onStateSettled((save) => settled.push(save));
        await proxy.loadModel("/models/a.gguf", info("a"));
        const file = `${os.tmpdir()}/ponder-proxy-restart-${process.pid}-${Date.now()}.state`;
        expect((await proxy.generate(request({states: {load: [], save: file}}))).states?.pending).toBe(file);
        await proxy.restart({build: "cpu"});
        expect(children[0]!.alive).toBe(false);
        expect(fs.existsSync(file)).toBe(true);
        expect(settled).toMatchObject([{path: file, saved: {bytes: 1000}}]);
        fs.rmSync(file, {force: true});
        await proxy.dispose();
    });

    it("kills an engine process that does not end when disposed", async () => {
        const {children, spawn} = memoryEngines();
        const proxy = new EngineProxy({spawn, disposeTimeoutMs: 20});
        await proxy.freeMemory();
        // This engine answers nothing more.
        const child = children[0]!;
        child.engine.dispose = () => new Promise(() => {});
        await proxy.dispose();
        expect(child.alive).toBe(false);
        await expect(proxy.generate(request())).rejects.toMatchObject({code: "ENGINE_STOPPED"});
    });
});
