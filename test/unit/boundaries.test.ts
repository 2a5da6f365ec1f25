import fs from "node:fs";
import path from "node:path";
import {describe, expect, it} from "vitest";

// One importer per boundary (docs/CONTRIBUTING.md): node-llama-cpp only in main/engine, better-sqlite3 only in
// main/db, Electron only in the entry point, the IPC binding, the engine process's spawner and the preload; renderer
// never imports main; the main process never loads llama.cpp (it runs in the engine process).
const root = path.resolve(import.meta.dirname, "../..");
const rules: {module: RegExp; allowed: RegExp}[] = [
    {module: /^node-llama-cpp(\/|$)/, allowed: /^main\/engine\//},
    {module: /^better-sqlite3$/, allowed: /^main\/db\//},
    {
        module: /^electron$/,
        allowed: /^(main\/index\.ts|main\/ipc\/registerElectronIpc\.ts|main\/engine\/process\/utilityEngine\.ts|preload\/index\.ts)$/
    }
];

function sourceFiles(dir: string): string[] {
    return fs.readdirSync(path.join(root, dir), {withFileTypes: true}).flatMap((entry) => {
        const rel = path.join(dir, entry.name);
        if (entry.isDirectory()) return sourceFiles(rel);
        return /\.(ts|svelte)$/.test(entry.name) ? [rel] : [];
    });
}

function importsOf(file: string): string[] {
    const text = fs.readFileSync(path.join(root, file), "utf8");
    return [...text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+"([^"]+)"|import\(\s*"([^"]+)"\s*\)/g)].map((m) => m[1] ?? m[2]!);
}

describe("module boundaries", () => {
    const files = ["main", "preload", "renderer"].filter((dir) => fs.existsSync(path.join(root, dir))).flatMap(sourceFiles);

    it("finds the sources", () => {
        expect(files.length).toBeGreaterThan(10);
    });

    it("keeps each third-party boundary behind its one folder", () => {
        const violations = files.flatMap((file) =>
            importsOf(file).flatMap((spec) =>
                rules.filter((rule) => rule.module.test(spec) && !rule.allowed.test(file)).map(() => `${file} imports ${spec}`)
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
    // the IPC and the API server share their HTTP plumbing in main/net, which imports neither; the engine's process side
    // (main/engine) imports none of the app's folders; the KV math (main/kv) neither.
    const folderRules: {from: RegExp; to: RegExp}[] = [
        {from: /^main\/server\//, to: /^main\/(services|ipc|db)\//},
        {from: /^main\/ipc\//, to: /^main\/server\//},
        {from: /^main\/net\//, to: /^main\/(server|services|ipc|db|engine)\//},
        {from: /^main\/engine\//, to: /^main\/(server|services|ipc|db|net)\//},
        {from: /^main\/kv\//, to: /^main\/(server|services|ipc|db|net)\//}
    ];

    it("keeps folder arrows pointing one way (no main/server -> main/services, no main/ipc -> main/server)", () => {
        const violations = files.flatMap((file) =>
            importsOf(file)
                .filter((spec) => spec.startsWith("."))
                .map((spec) => path.join(path.dirname(file), spec))
                .filter((target) => folderRules.some((rule) => rule.from.test(file) && rule.to.test(target)))
                .map((target) => `${file} imports ${target}`)
        );
        expect(files.some((file) => file.startsWith("main/net/"))).toBe(true);
        expect(violations).toEqual([]);
    });

    it("keeps the KV math (main/kv) pure: no package, and of main/engine its types only", () => {
        const kvFiles = files.filter((file) => file.startsWith("main/kv/"));
        const violations = kvFiles.flatMap((file) => {
            const text = fs.readFileSync(path.join(root, file), "utf8");
            return [...text.matchAll(/(?:^|\n)\s*(import|export)\s(type\s)?[^;]*?from\s+"([^"]+)"|import\(\s*"([^"]+)"\s*\)/g)]
                .filter((m) => {
                    const spec = m[3] ?? m[4]!;
                    if (!spec.startsWith(".")) return true;
                    return m[2] == null && /^main\/engine\//.test(path.join(path.dirname(file), spec));
                })
                .map((m) => `${file} imports ${m[3] ?? m[4]}`);
        });
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
            const text = fs.readFileSync(path.join(root, file), "utf8");
            for (const match of text.matchAll(/(?:^|\n)\s*(import|export)\s(?!type\s)[^;]*?from\s+"([^"]+)"|import\(\s*"([^"]+)"\s*\)/g)) {
                const spec = match[2] ?? match[3]!;
                if (!spec.startsWith(".")) external.set(spec, new Set([...(external.get(spec) ?? []), file]));
                else visit(path.join(path.dirname(file), spec).replace(/\.js$/, ".ts"));
            }
        };
        const llamaImporters = () =>
            [...external].filter(([spec]) => /^node-llama-cpp/.test(spec)).flatMap(([, importers]) => [...importers]);
        visit("main/index.ts");
        visit("main/headless.ts");
        expect(reached.has("main/services/ChatService.ts")).toBe(true);
        expect(reached.has("main/engine/process/EngineProxy.ts")).toBe(true);
        // Only the downloader, which is JavaScript over HTTP: no native code loads in the main process.
        expect(llamaImporters()).toEqual(["main/engine/downloadModel.ts"]);
        expect(
            [...reached].filter((file) =>
                /^main\/engine\/(Engine|EngineRuntime|EngineContext|loadChatModel|generateAnswer|prefill|SavedStates|chatPrompt|KvController|inspectModel|loadRuntime)\.ts$/.test(
                    file
                )
            )
        ).toEqual([]);

        // The engine process is what loads them.
        reached.clear();
        external.clear();
        visit("main/engineProcess.ts");
        expect(reached.has("main/engine/Engine.ts")).toBe(true);
        expect(llamaImporters().length).toBeGreaterThan(0);
        expect([...reached].some((file) => /^main\/(db|services|ipc|server)\//.test(file))).toBe(false);
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
