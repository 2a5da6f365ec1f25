// `npm run lint`: ESLint's and typescript-eslint's recommended rules, eslint-plugin-svelte's for the components, the
// promise rules that need types (a promise nobody awaits loses its error), the house rules of docs/CONTRIBUTING.md
// that a linter can check, and one importer per boundary (node-llama-cpp only in the engine process's folders of
// main/engine/, better-sqlite3 only in main/db/, Electron only where the app meets it, `ipcMain` only in main/ipc/).
// test/unit/boundaries.test.ts checks the same boundaries, dynamic `import()` included. Layout is Prettier's job.
import js from "@eslint/js";
import {defineConfig} from "eslint/config";
import svelte from "eslint-plugin-svelte";
import globals from "globals";
import tseslint from "typescript-eslint";
import svelteConfig from "./svelte.config.js";

const llamaMessage = "node-llama-cpp is imported only in the engine process's folders of main/engine/ (and by the downloader).";
/** The folders of main/engine whose code runs in the engine process (test/unit/boundaries.test.ts names them too). */
const engineProcess = ["runtime", "generation", "states", "pruning", "calibration", "native"].map((dir) => `main/engine/${dir}/**`);

/** Each boundary: the imports that only its own folder makes. */
const boundaries = {
    llama: {
        paths: [{name: "node-llama-cpp", message: llamaMessage}],
        patterns: [{group: ["node-llama-cpp/*"], message: llamaMessage}]
    },
    sqlite: {paths: [{name: "better-sqlite3", message: "better-sqlite3 is imported only in main/db/."}], patterns: []},
    electron: {
        paths: [
            {
                name: "electron",
                message: "Electron is imported only by main/index.ts, main/ipc/, the engine process's spawner and preload/index.ts."
            }
        ],
        patterns: [
            {
                group: ["electron/*"],
                message: "Electron is imported only by main/index.ts, main/ipc/, the engine process's spawner and preload/index.ts."
            }
        ]
    },
    ipcMain: {paths: [{name: "electron", importNames: ["ipcMain"], message: "ipcMain is used only in main/ipc/."}], patterns: []},
    mainCode: {
        paths: [],
        patterns: [
            {regex: "(^|/)main/", message: "The renderer reaches the main process only through the preload bridge."},
            {regex: "(^|/)preload/(?!contract\\.js$)", message: "The renderer imports only the contract from preload/."}
        ]
    }
};

/** `no-restricted-imports` set to the given boundaries (a later block's setting replaces an earlier one's). */
function restrictImports(...names) {
    return [
        "error",
        {paths: names.flatMap((name) => boundaries[name].paths), patterns: names.flatMap((name) => boundaries[name].patterns)}
    ];
}

export default defineConfig(
    {
        ignores: [
            "out/",
            "dist/",
            ".fixtures/",
            "native/.build/",
            "native/patches/",
            "test/bench/results/",
            "test/eval/train/runs/",
            "resources/"
        ]
    },
    js.configs.recommended,
    tseslint.configs.recommended,
    svelte.configs.recommended,
    {
        languageOptions: {globals: {...globals.node}}
    },
    {
        files: ["renderer/**"],
        languageOptions: {globals: {...globals.browser}}
    },
    {
        files: ["**/*.svelte", "**/*.svelte.ts"],
        languageOptions: {parserOptions: {parser: tseslint.parser, extraFileExtensions: [".svelte"], svelteConfig}}
    },
    {
        files: ["**/*.ts", "**/*.svelte"],
        rules: {
            // TypeScript and svelte-check resolve names; `no-undef` knows neither types nor ambient declarations.
            "no-undef": "off"
        }
    },
    {
        rules: {
            // docs/CONTRIBUTING.md: prefer `type` to `interface`.
            "@typescript-eslint/consistent-type-definitions": ["error", "type"],
            // `x == null` is the house idiom for "null or undefined"; everything else compares strictly.
            eqeqeq: ["error", "always", {null: "ignore"}],
            "@typescript-eslint/no-unused-vars": ["error", {argsIgnorePattern: "^_", varsIgnorePattern: "^_"}],
            "no-restricted-imports": "off"
        }
    },
    {
        files: ["**/*.ts", "**/*.svelte"],
        ignores: ["**/*.d.mts"],
        // Types from tsconfig.node.json and tsconfig.web.json (JavaScript files are linted without them); the renderer
        // tests' harness components belong to neither.
        languageOptions: {
            parserOptions: {
                projectService: {allowDefaultProject: ["test/unit/renderer/*.svelte"]},
                tsconfigRootDir: import.meta.dirname,
                extraFileExtensions: [".svelte"]
            }
        },
        rules: {
            "@typescript-eslint/no-floating-promises": "error",
            "@typescript-eslint/no-misused-promises": "error",
            "@typescript-eslint/await-thenable": "error"
        }
    },
    {
        // `Policy<any, any>` lets the registry hold each policy's own parameter type; the policy catalogue replaces it.
        files: ["main/engine/policies/index.ts"],
        rules: {"@typescript-eslint/no-explicit-any": "off"}
    },
    {files: ["main/**", "preload/**", "renderer/**"], rules: {"no-restricted-imports": restrictImports("llama", "sqlite", "electron")}},
    // The engine process, and the downloader (node-llama-cpp's JavaScript over HTTP, in the main process).
    {
        files: [...engineProcess, "main/engine/host/downloadModel.ts"],
        rules: {"no-restricted-imports": restrictImports("sqlite", "electron")}
    },
    {files: ["main/db/**"], rules: {"no-restricted-imports": restrictImports("llama", "electron")}},
    {files: ["main/ipc/**"], rules: {"no-restricted-imports": restrictImports("llama", "sqlite")}},
    {files: ["main/index.ts", "preload/index.ts"], rules: {"no-restricted-imports": restrictImports("llama", "sqlite", "ipcMain")}},
    // The engine process is an Electron utility process where Electron runs the app.
    {files: ["main/engine/host/utilityEngine.ts"], rules: {"no-restricted-imports": restrictImports("llama", "sqlite", "ipcMain")}},
    {files: ["renderer/**"], rules: {"no-restricted-imports": restrictImports("llama", "sqlite", "electron", "mainCode")}}
);
