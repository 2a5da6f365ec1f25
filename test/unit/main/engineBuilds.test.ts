// Which engine build runs: the builds present in node-llama-cpp's localBuilds (fake trees in a temp folder: only the CPU
// build exists on this machine, so the GPU builds here are folders with stand-in files, never loaded), the order auto
// tries them in, the stored setting, and the engine restarted on the build chosen.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {afterAll, describe, expect, it} from "vitest";
import type {EngineBuild, EngineStatus, ModelInfo} from "../../../preload/contract.js";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {currentSeriesHash} from "../../../main/engine/builds/currentSeriesHash.js";
import {engineBuildOrder} from "../../../main/engine/builds/engineBuildOrder.js";
import {listEngineBuilds} from "../../../main/engine/builds/listEngineBuilds.js";
import {EngineProxy} from "../../../main/engine/host/EngineProxy.js";
import {createDispatch} from "../../../main/ipc/dispatch.js";
import {createHandlers} from "../../../main/ipc/handlers.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {readEngineBuildChoice} from "../../../main/services/EngineBuildService.js";
import {computeSeriesHash} from "../../../native/seriesHash.mjs";
import {FakeEngine} from "./FakeEngine.js";
import {memoryEngines, until} from "./memoryEngines.js";

const series = "0123456789abcdef";
const roots: string[] = [];
afterAll(() => {
    for (const root of roots) fs.rmSync(root, {recursive: true, force: true});
});

type FakeBuild = {
    binary?: boolean;
    done?: boolean;
    stamp?: "current" | "stale" | "none" | "broken";
    gpu?: "cuda" | "vulkan" | "metal" | false;
};

/** A localBuilds folder as node-llama-cpp and native/build.mjs leave it, with stand-in files. */
function localBuilds(folders: Record<string, FakeBuild>): string {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-local-builds-"));
    roots.push(root);
    for (const [folder, {binary = true, done = true, stamp = "current", gpu}] of Object.entries(folders)) {
        const dir = path.join(root, folder);
        fs.mkdirSync(path.join(dir, "Release"), {recursive: true});
        const backend = gpu ?? (folder.split("-")[2] as "cuda" | "vulkan" | "metal" | undefined) ?? false;
        fs.writeFileSync(path.join(dir, "Release", "_nlcBuildMetadata.json"), JSON.stringify({buildOptions: {gpu: backend}}));
        if (binary) fs.writeFileSync(path.join(dir, "Release", "llama-addon.node"), "not a real binary");
        if (done) fs.writeFileSync(path.join(dir, "buildDone.status"), "");
        if (stamp === "broken") fs.writeFileSync(path.join(dir, "ponder-native.json"), '{"seriesHash": ');
        else if (stamp !== "none")
            fs.writeFileSync(
                path.join(dir, "ponder-native.json"),
                JSON.stringify({
                    seriesHash: stamp === "current" ? series : "fedcba9876543210",
                    config: "portable",
                    gpu: backend,
                    builtAt: "2026-11-23T20:12:20.084Z"
                })
            );
    }
    return root;
}

const byFolder = (builds: EngineBuild[]) => Object.fromEntries(builds.map((build) => [build.folder, build]));

describe("the engine builds present", () => {
    it("lists every backend's folder, usable only when complete and stamped with this version's patch series", () => {
        const root = localBuilds({
            "linux-x64": {},
            "linux-x64-cuda": {},
            "linux-x64-vulkan": {stamp: "stale"},
            "linux-x64-metal": {},
            "linux-x64-cuda-4c3f1a": {}
        });
        const builds = listEngineBuilds({root, seriesHash: series, platform: "linux", arch: "x64"});
        // Auto's order: CUDA, Vulkan, then CPU; usable ones first within a backend.
        expect(builds.map((build) => build.folder)).toEqual([
            "linux-x64-cuda",
            "linux-x64-cuda-4c3f1a",
            "linux-x64-vulkan",
            "linux-x64",
            "linux-x64-metal"
        ]);
        const found = byFolder(builds);
        expect(found["linux-x64"]).toEqual({
            backend: "cpu",
            folder: "linux-x64",
            usable: true,
            reason: null,
            config: "portable",
            builtAt: "2026-11-23T20:12:20.084Z"
        });
        expect(found["linux-x64-cuda"]).toMatchObject({backend: "cuda", usable: true});
        expect(found["linux-x64-vulkan"]).toMatchObject({backend: "vulkan", usable: false});
        expect(found["linux-x64-vulkan"]!.reason).toBe(
            "Stale: built from patch series fedcba9876543210, this version needs 0123456789abcdef (rebuild with npm run build:native)"
        );
        // getLlama never loads these: a Metal build on Linux, a build with custom CMake options.
        expect(found["linux-x64-metal"]!.reason).toBe("Metal runs on macOS only");
        expect(found["linux-x64-cuda-4c3f1a"]).toMatchObject({
            usable: false,
            reason: expect.stringMatching(/the CUDA build is linux-x64-cuda$/)
        });
    });

    it("says why an incomplete or unpatched build cannot run", () => {
        const cases: Array<[FakeBuild, RegExp]> = [
            [{binary: false}, /^Incomplete: it has no binary \(Release\/llama-addon\.node\)$/],
            [{done: false}, /^Incomplete: its build did not finish \(no buildDone\.status\)$/],
            [{stamp: "none"}, /^Not Ponder's patched build: it has no ponder-native\.json stamp/],
            [{stamp: "broken"}, /^Its ponder-native\.json stamp cannot be read$/],
            [{stamp: "stale"}, /^Stale: /]
        ];
        for (const [build, reason] of cases) {
            const [listed] = listEngineBuilds({
                root: localBuilds({"linux-x64-cuda": build}),
                seriesHash: series,
                platform: "linux",
                arch: "x64"
            });
            expect(listed).toMatchObject({backend: "cuda", usable: false, reason: expect.stringMatching(reason)});
        }
        // Without a known series (no native/ and no build-time hash) the stamp's series is not compared.
        expect(
            listEngineBuilds({root: localBuilds({"linux-x64": {stamp: "stale"}}), seriesHash: null, platform: "linux", arch: "x64"})[0]!
                .usable
        ).toBe(true);
    });

    it("names the folders as node-llama-cpp does on macOS and Windows, and finds nothing where there is no folder", () => {
        const root = localBuilds({
            "mac-arm64-metal": {},
            "mac-arm64": {},
            "win-x64-cuda": {},
            "stray-file-like-folder": {stamp: "none", gpu: undefined}
        });
        const mac = listEngineBuilds({root, seriesHash: series, platform: "darwin", arch: "arm64"});
        expect(mac.filter((build) => build.usable).map((build) => build.folder)).toEqual(["mac-arm64-metal", "mac-arm64"]);
        const windows = listEngineBuilds({root, seriesHash: series, platform: "win32", arch: "x64"});
        expect(windows.filter((build) => build.usable).map((build) => build.folder)).toEqual(["win-x64-cuda"]);
        expect(listEngineBuilds({root: path.join(root, "missing"), seriesHash: series})).toEqual([]);
    });

    it("finds this machine's patched CPU build where getLlama looks (node-llama-cpp's localBuilds)", async () => {
        const seriesHash = await currentSeriesHash();
        expect(seriesHash).toBe(computeSeriesHash(JSON.parse(fs.readFileSync("node_modules/node-llama-cpp/package.json", "utf8")).version));
        const builds = listEngineBuilds({seriesHash});
        expect(builds.find((build) => build.folder === `linux-x64`)).toMatchObject({backend: "cpu", usable: true, reason: null});
    });
});

describe("the order builds are tried in", () => {
    /** The builds of these folders; a folder ending in `!` is stale. */
    const builds = (...folders: string[]) =>
        listEngineBuilds({
            root: localBuilds(
                Object.fromEntries(
                    folders.map((folder): [string, FakeBuild] => [folder.replace("!", ""), folder.endsWith("!") ? {stamp: "stale"} : {}])
                )
            ),
            seriesHash: series,
            platform: "linux",
            arch: "x64"
        });
    const backends = (plan: ReturnType<typeof engineBuildOrder>) => plan.candidates.map((build) => build.backend);

    it("auto takes CUDA, then Vulkan, then CPU; Metal, then CPU, on macOS", () => {
        const all = builds("linux-x64", "linux-x64-vulkan", "linux-x64-cuda");
        expect(backends(engineBuildOrder(all, "auto", {platform: "linux"}))).toEqual(["cuda", "vulkan", "cpu"]);
        expect(backends(engineBuildOrder(builds("linux-x64", "linux-x64-vulkan"), "auto", {platform: "linux"}))).toEqual(["vulkan", "cpu"]);
        expect(backends(engineBuildOrder(builds("linux-x64", "linux-x64-cuda!"), "auto", {platform: "linux"}))).toEqual(["cpu"]);
        const mac = listEngineBuilds({
            root: localBuilds({"mac-arm64": {}, "mac-arm64-metal": {}}),
            seriesHash: series,
            platform: "darwin",
            arch: "arm64"
        });
        expect(backends(engineBuildOrder(mac, "auto", {platform: "darwin"}))).toEqual(["metal", "cpu"]);
        expect(engineBuildOrder(all, "auto", {platform: "linux"}).problem).toBeNull();
    });

    it("auto passes over GPU builds whose driver this machine lacks, never over the CPU build", () => {
        const all = builds("linux-x64", "linux-x64-vulkan", "linux-x64-cuda");
        expect(backends(engineBuildOrder(all, "auto", {platform: "linux", supported: ["vulkan"]}))).toEqual(["vulkan", "cpu"]);
        expect(backends(engineBuildOrder(all, "auto", {platform: "linux", supported: []}))).toEqual(["cpu"]);
    });

    it("a chosen backend goes first, the others after it as fallbacks; a missing or unusable one says why", () => {
        const all = builds("linux-x64", "linux-x64-vulkan", "linux-x64-cuda!");
        expect(engineBuildOrder(all, "vulkan", {platform: "linux"})).toMatchObject({problem: null});
        expect(backends(engineBuildOrder(all, "cpu", {platform: "linux", supported: []}))).toEqual(["cpu"]);
        expect(backends(engineBuildOrder(all, "cpu", {platform: "linux"}))).toEqual(["cpu", "vulkan"]);
        const stale = engineBuildOrder(all, "cuda", {platform: "linux"});
        expect(backends(stale)).toEqual(["vulkan", "cpu"]);
        expect(stale.problem).toMatch(/^The CUDA build cannot be used: stale: built from patch series/);
        expect(engineBuildOrder(all, "metal", {platform: "linux"}).problem).toBe("No Metal build is present");
    });
});

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

describe("the engine-build setting", () => {
    const fakeBuilds = () =>
        listEngineBuilds({
            root: localBuilds({"linux-x64": {}, "linux-x64-cuda": {stamp: "stale"}, "linux-x64-vulkan": {}}),
            seriesHash: series,
            platform: "linux",
            arch: "x64"
        });

    it("is stored, restarts the engine process on the chosen build and loads the model again, with the status saying so", async () => {
        const {children, spawn} = memoryEngines();
        const db = new AppDatabase(":memory:");
        expect(readEngineBuildChoice(db)).toBe("auto");
        const proxy = new EngineProxy({spawn, runtime: {build: readEngineBuildChoice(db)}});
        const statuses: EngineStatus[] = [];
        const list = fakeBuilds();
        const services = new AppServices(
            db,
            proxy,
            (channel, payload) => {
                if (channel === "engine:status") statuses.push(payload as EngineStatus);
            },
            {version: "t", modelsDir: "/tmp/ponder-test-models", engineBuilds: {list: async () => list, platform: "linux"}}
        );
        await proxy.start();
        await proxy.loadModel(model.path, model);
        expect(children[0]!.runtime).toEqual({build: "auto"});

        const answer = await services.engineBuilds.set("vulkan");
        expect(answer.choice).toBe("vulkan");
        expect(answer.autoOrder).toEqual(["cuda", "vulkan", "cpu"]);
        // A new engine process started with the choice, and the model came back in it; the old one ended.
        expect(children).toHaveLength(2);
        expect(children[0]!.alive).toBe(false);
        expect(children[1]!.runtime).toEqual({build: "vulkan", rpcServers: []});
        expect(children[1]!.engine.paths).toEqual([model.path]);
        expect(proxy.status).toMatchObject({state: "ready", build: {gpu: "vulkan", requested: "vulkan"}});
        expect(proxy.status.message).toBe("The engine now runs the Vulkan build (patched).");
        expect(
            statuses.some(
                (status) =>
                    status.state === "loading" &&
                    /^Restarting the engine with the Vulkan build and loading m again/.test(status.message ?? "")
            )
        ).toBe(true);
        expect(readEngineBuildChoice(db)).toBe("vulkan");
        expect((await services.engineBuilds.get()).choice).toBe("vulkan");

        // A crash later restarts on the chosen build, not on auto.
        children[1]!.die();
        await until(() => children.length === 3 && proxy.status.state === "ready");
        expect(children[2]!.runtime).toEqual({build: "vulkan", rpcServers: []});

        // Back to auto.
        await services.engineBuilds.set("auto");
        expect(children.at(-1)!.runtime).toEqual({build: "auto", rpcServers: []});
        await services.dispose();
    });

    it("says so in the status when the chosen build did not load and another patched build runs", async () => {
        const fallback =
            "The CUDA build could not be loaded (libcuda.so.1: cannot open shared object file): running the CPU build instead.";
        const {children, spawn} = memoryEngines((engine, runtime) => {
            if (runtime.build === "cuda") engine.status = {...engine.status, build: {...engine.status.build!, gpu: false, fallback}};
        });
        const proxy = new EngineProxy({spawn});
        await proxy.loadModel(model.path, model);
        const build = await proxy.restart({build: "cuda"});
        expect(build).toMatchObject({gpu: false, requested: "cuda", fallback});
        expect(proxy.status).toMatchObject({state: "ready", message: fallback, build: {fallback}});
        expect(children[1]!.engine.paths).toEqual([model.path]);
        await proxy.dispose();
    });

    it("says which build stopped the engine process when loading it did, and starts it again", async () => {
        let spawned = 0;
        const {children, spawn} = memoryEngines((engine) => {
            // The second process (the first on the CUDA build) dies in llama.cpp while it loads the build.
            if (++spawned === 2) engine.start = () => new Promise(() => {});
        });
        const proxy = new EngineProxy({spawn});
        await proxy.start();
        const restarting = proxy.restart({build: "cuda"});
        await until(() => children.length === 2 && children[1]!.sent.length === 1);
        children[1]!.die({code: null, signal: "SIGSEGV"});
        await expect(restarting).rejects.toMatchObject({code: "ENGINE_STOPPED"});
        await until(() => children.length === 3 && /so it was restarted/.test(proxy.status.message ?? ""));
        expect(proxy.status.message).toMatch(
            /^Starting the engine on the CUDA build stopped it \(The engine process crashed \(SIGSEGV\)\), so it was restarted/
        );
        expect(children[2]!.runtime).toEqual({build: "cuda"});
        await proxy.dispose();
    });

    it("refuses to restart the engine under an answer being written", async () => {
        const {spawn} = memoryEngines((engine) => (engine.thought = Array.from({length: 500}, () => " x")));
        const proxy = new EngineProxy({spawn});
        await proxy.loadModel(model.path, model);
        const abort = new AbortController();
        const answer = proxy.generate({
            history: [{role: "user", text: "?"}],
            systemPrompt: "",
            temperature: 0,
            maxTokens: 1000,
            signal: abort.signal,
            kv: {compression: {policy: "full"} as never, cells: 512},
            onChunk: () => {}
        });
        await new Promise((resolve) => setTimeout(resolve, 20));
        await expect(proxy.restart({build: "cpu"})).rejects.toMatchObject({code: "BUSY"});
        abort.abort();
        await answer;
        await proxy.dispose();
    });

    it("refuses a backend with no usable build, and a change while an answer is being written", async () => {
        const engine = new FakeEngine();
        engine.thought = Array.from({length: 200}, () => " x");
        const db = new AppDatabase(":memory:");
        const list = fakeBuilds();
        const services = new AppServices(db, engine.asEngine(), () => {}, {
            version: "t",
            modelsDir: "/tmp/ponder-test-models",
            chat: {flushIntervalMs: 0},
            engineBuilds: {list: async () => list, platform: "linux"}
        });
        await expect(services.engineBuilds.set("cuda")).rejects.toMatchObject({
            code: "BAD_REQUEST",
            message: expect.stringMatching(/^The CUDA build cannot be used: stale: .*: it cannot be chosen$/)
        });
        await expect(services.engineBuilds.set("metal")).rejects.toMatchObject({
            code: "BAD_REQUEST",
            message: "No Metal build is present: it cannot be chosen"
        });
        expect(engine.restarts).toEqual([]);
        expect(readEngineBuildChoice(db)).toBe("auto");

        const conversation = services.conversations.create();
        services.chat.send(conversation.id, "think long");
        await until(() => services.queue.running);
        await expect(services.engineBuilds.set("cpu")).rejects.toMatchObject({code: "BUSY"});
        await services.chat.stop(conversation.id);
        await services.chat.idle();
        await services.engineBuilds.set("cpu");
        expect(engine.restarts).toEqual([{build: "cpu", rpcServers: []}]);
        await services.dispose();
    });

    it("keeps auto when the stored value is damaged", () => {
        const db = new AppDatabase(":memory:");
        db.settings.set("engine", {build: "quantum"});
        expect(readEngineBuildChoice(db)).toBe("auto");
        db.settings.set("engine", {build: "cpu"});
        expect(readEngineBuildChoice(db)).toBe("cpu");
    });

    it("validates the IPC payload: a malformed choice gets a clear error, a good one reaches the service", async () => {
        const engine = new FakeEngine();
        const list = fakeBuilds();
        const services = new AppServices(new AppDatabase(":memory:"), engine.asEngine(), () => {}, {
            version: "t",
            modelsDir: "/tmp/ponder-test-models",
            engineBuilds: {list: async () => list, platform: "linux"}
        });
        const dispatch = createDispatch(createHandlers(services, {openExternal: async () => {}, pickModelFile: async () => null}));
        for (const payload of [{build: "gpu"}, {build: false}, {build: "cpu", extra: 1}, {}, "cpu", null]) {
            const result = await dispatch("engine:setBuild", payload);
            expect(result).toMatchObject({
                ok: false,
                error: {code: "BAD_REQUEST", message: expect.stringMatching(/^Invalid engine:setBuild request: /)}
            });
        }
        expect(await dispatch("engine:setBuild", {build: "gpu"})).toMatchObject({
            error: {message: expect.stringContaining("The engine build must be one of auto, cuda, vulkan, metal or cpu")}
        });
        expect(await dispatch("engine:builds", {unexpected: true})).toMatchObject({ok: false, error: {code: "BAD_REQUEST"}});
        expect(engine.restarts).toEqual([]);

        const builds = await dispatch("engine:builds", undefined);
        expect(builds).toMatchObject({ok: true, value: {choice: "auto", autoOrder: ["cuda", "vulkan", "cpu"]}});
        expect((builds as {value: {builds: EngineBuild[]}}).value.builds.map((build) => [build.backend, build.usable])).toEqual([
            ["cuda", false],
            ["vulkan", true],
            ["cpu", true]
        ]);
        expect(await dispatch("engine:setBuild", {build: "cpu"})).toMatchObject({ok: true, value: {choice: "cpu"}});
        expect(engine.restarts).toEqual([{build: "cpu", rpcServers: []}]);
    });
});
