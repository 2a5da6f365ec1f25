import fs from "node:fs";
import path from "node:path";
import {describe, expect, it} from "vitest";
import {sourceImports} from "./sourceImports.js";

// One importer per boundary (docs/CONTRIBUTING.md): node-llama-cpp only in the engine process's folders of main/engine,
// better-sqlite3 only in main/db, Electron only in the entry point, the IPC binding, the engine process's spawner and the
// preload; renderer never imports main; the main process never loads llama.cpp (it runs in the engine process).
const root = path.resolve(import.meta.dirname, "../..");

// Which process runs a file of main/engine is said by its folder. The engine process's folders hold llama.cpp's side:
// the runtime, generation, saved states, the KV controller, calibration and the native bindings. `host/` is the main
// process's side: the proxy and supervisor of the engine process, its spawners, the downloader. The rest runs in both:
// the API's types (`EngineApi.ts`, `protocol.ts`) and pure code or file reads that load nothing native (`builds/`,
// `gguf/`, `policies/`, `retention/`, `rpc/`).
const engineProcess = ["runtime", "generation", "states", "pruning", "calibration", "native"].map((dir) => `main/engine/${dir}/`);
const mainProcess = ["main/engine/host/"];
const both = ["builds", "gguf", "policies", "retention", "rpc"].map((dir) => `main/engine/${dir}/`);
const inFolders = (folders: readonly string[]) => (file: string) => folders.some((folder) => file.startsWith(folder));
const inEngineProcess = inFolders(engineProcess);
/** The engine process's entry point, the one file outside its folders that loads them. */
const engineEntry = "main/engineProcess.ts";
/** The downloader: node-llama-cpp's JavaScript over HTTP, in the main process; nothing native. */
const downloader = "main/engine/host/downloadModel.ts";

const rules: {module: RegExp; allowed: (file: string) => boolean}[] = [
    {module: /^node-llama-cpp(\/|$)/, allowed: (file) => inEngineProcess(file) || file === downloader},
    {module: /^better-sqlite3$/, allowed: inFolders(["main/db/"])},
    {
        module: /^electron$/,
        allowed: (file) =>
            ["main/index.ts", "main/ipc/registerElectronIpc.ts", "main/engine/host/utilityEngine.ts", "preload/index.ts"].includes(file)
    }
];

describe("module boundaries", () => {
    const imports = sourceImports(["main", "preload", "renderer"]);
    const files = [...imports.keys()];
    const importsOf = (file: string) => imports.get(file)!.map(({spec}) => spec);

    it("finds the sources", () => {
        expect(files.length).toBeGreaterThan(10);
    });

    it("keeps each third-party boundary behind its one folder", () => {
        const violations = files.flatMap((file) =>
            importsOf(file).flatMap((spec) =>
                rules.filter((rule) => rule.module.test(spec) && !rule.allowed(file)).map(() => `${file} imports ${spec}`)
            )
        );
        expect(violations).toEqual([]);
    });

    it("keeps the API server's HTTP side off the database and the file system", () => {
        const violations = files
            .filter((file) => file.startsWith("main/server/"))
            .flatMap((file) =>
                importsOf(file)
                    .filter((spec) => /(^|\/)db\//.test(spec) || /^(node:)?fs(\/promises)?$/.test(spec) || /Service\.js$/.test(spec))
                    .map((spec) => `${file} imports ${spec}`)
            );
        expect(files.some((file) => file.startsWith("main/server/"))).toBe(true);
        expect(violations).toEqual([]);
    });

    // Folder arrows point one way: the services compose the API server (it declares what it needs of them, its backend);
    // the IPC and the API server share their HTTP plumbing in main/net, which imports neither; the engine (main/engine)
    // imports none of the app's folders; the KV math (main/kv) neither.
    const folderRules: {from: RegExp; to: RegExp}[] = [
        {from: /^main\/server\//, to: /^main\/(services|ipc|db)\//},
        {from: /^main\/ipc\//, to: /^main\/server\//},
        {from: /^main\/net\//, to: /^main\/(server|services|ipc|db|engine)\//},
        {from: /^main\/engine\//, to: /^main\/(server|services|ipc|db|net)\//},
        {from: /^main\/kv\//, to: /^main\/(server|services|ipc|db|net)\//}
    ];

    it("keeps folder arrows pointing one way (no main/server -> main/services, no main/ipc -> main/server)", () => {
        const violations = files.flatMap((file) =>
            imports
                .get(file)!
                .flatMap(({target}) => (target == null ? [] : [target]))
                .filter((target) => folderRules.some((rule) => rule.from.test(file) && rule.to.test(target)))
                .map((target) => `${file} imports ${target}`)
        );
        expect(files.some((file) => file.startsWith("main/net/"))).toBe(true);
        expect(violations).toEqual([]);
    });

    it("says in each folder of main/engine which process runs it", () => {
        const folders = fs
            .readdirSync(path.join(root, "main/engine"), {withFileTypes: true})
            .filter((entry) => entry.isDirectory())
            .map((entry) => `main/engine/${entry.name}/`);
        expect(folders.sort()).toEqual([...engineProcess, ...mainProcess, ...both].sort());
    });

    it("keeps the engine process's folders out of the main process: of them it imports types only", () => {
        const violations = files
            .filter((file) => file.startsWith("main/") && !inEngineProcess(file) && file !== engineEntry)
            .flatMap((file) =>
                imports
                    .get(file)!
                    .filter(({target, typeOnly}) => target != null && !typeOnly && inEngineProcess(target))
                    .map(({target}) => `${file} imports ${target}`)
            );
        expect(files.filter(inEngineProcess)).toContain("main/engine/runtime/Engine.ts");
        expect(violations).toEqual([]);
    });

    it("keeps the main process's side of the engine (main/engine/host) out of the engine process", () => {
        const violations = files
            .filter((file) => (file.startsWith("main/engine/") && !inFolders(mainProcess)(file)) || file === engineEntry)
            .flatMap((file) =>
                imports
                    .get(file)!
                    .filter(({target}) => target != null && inFolders(mainProcess)(target))
                    .map(({target}) => `${file} imports ${target}`)
            );
        expect(files.filter(inFolders(mainProcess))).toContain("main/engine/host/EngineProxy.ts");
        expect(violations).toEqual([]);
    });

    it("keeps the KV math (main/kv) pure: no package, and of main/engine its types only", () => {
        const kvFiles = files.filter((file) => file.startsWith("main/kv/"));
        const violations = kvFiles.flatMap((file) =>
            imports
                .get(file)!
                .filter(({target, typeOnly}) => target == null || (!typeOnly && target.startsWith("main/engine/")))
                .map(({spec}) => `${file} imports ${spec}`)
        );
        expect(kvFiles).toContain("main/kv/budgetCap.ts");
        expect(violations).toEqual([]);
    });

    it("keeps llama.cpp out of the main process: the app's and headless mode's code reach node-llama-cpp only through the engine process", () => {
        // What the entry points load at run time (type-only imports are erased), followed through relative imports.
        const reached = new Set<string>();
        /** Each external module, with the files that import it. */
        const external = new Map<string, Set<string>>();
        const visit = (file: string) => {
            if (reached.has(file)) return;
            reached.add(file);
            for (const {spec, target, typeOnly} of imports.get(file)!) {
                if (typeOnly) continue;
                if (target == null) external.set(spec, new Set([...(external.get(spec) ?? []), file]));
                else visit(target);
            }
        };
        const llamaImporters = () =>
            [...external].filter(([spec]) => /^node-llama-cpp/.test(spec)).flatMap(([, importers]) => [...importers]);
        visit("main/index.ts");
        visit("main/headless.ts");
        expect(reached.has("main/services/ChatService.ts")).toBe(true);
        expect(reached.has("main/engine/host/EngineProxy.ts")).toBe(true);
        // Only the downloader, which is JavaScript over HTTP: no native code loads in the main process.
        expect(llamaImporters()).toEqual([downloader]);
        expect([...reached].filter(inEngineProcess)).toEqual([]);

        // The engine process is what loads them.
        reached.clear();
        external.clear();
        visit(engineEntry);
        expect(reached.has("main/engine/runtime/Engine.ts")).toBe(true);
        expect(llamaImporters().length).toBeGreaterThan(0);
        expect([...reached].some((file) => /^main\/(db|services|ipc|server)\//.test(file) || inFolders(mainProcess)(file))).toBe(false);
    });

    it("keeps the renderer off main-process code, except the contract", () => {
        const violations = files
            .filter((file) => file.startsWith("renderer/"))
            .flatMap((file) =>
                importsOf(file)
                    .filter((spec) => /(^|\/)main\//.test(spec) || (/preload\//.test(spec) && !/preload\/contract/.test(spec)))
                    .map((spec) => `${file} imports ${spec}`)
            );
        expect(violations).toEqual([]);
    });
});
