import {readFileSync} from "node:fs";
import {resolve} from "node:path";
import {defineConfig} from "electron-vite";
import {svelte} from "@sveltejs/vite-plugin-svelte";
import {computeSeriesHash} from "./native/seriesHash.mjs";

// The patch series this build of the app needs: a local llama.cpp build stamped with another one is stale
// (main/engine/builds/currentSeriesHash.ts). The app ships without native/, so the hash is fixed here.
const nodeLlamaCpp = JSON.parse(readFileSync(resolve(import.meta.dirname, "node_modules/node-llama-cpp/package.json"), "utf8")) as {
    version: string;
};
const seriesHash = computeSeriesHash(nodeLlamaCpp.version);

// Ponder's layout is not electron-vite's default `src/{main,preload,renderer}`, so every entry is explicit.
export default defineConfig({
    main: {
        define: {__PONDER_SERIES_HASH__: JSON.stringify(seriesHash)},
        build: {
            outDir: "out/main",
            externalizeDeps: true,
            rollupOptions: {
                input: {
                    index: resolve(import.meta.dirname, "main/index.ts"),
                    headless: resolve(import.meta.dirname, "main/headless.ts"),
                    engineProcess: resolve(import.meta.dirname, "main/engineProcess.ts")
                }
            }
        }
    },
    preload: {
        build: {
            outDir: "out/preload",
            rollupOptions: {
                input: {index: resolve(import.meta.dirname, "preload/index.ts")},
                // A sandboxed preload cannot `import`: emit one CommonJS file.
                output: {format: "cjs", entryFileNames: "[name].cjs"}
            }
        }
    },
    renderer: {
        root: resolve(import.meta.dirname, "renderer"),
        plugins: [svelte({configFile: resolve(import.meta.dirname, "svelte.config.js")})],
        build: {
            outDir: resolve(import.meta.dirname, "out/renderer"),
            rollupOptions: {input: {index: resolve(import.meta.dirname, "renderer/index.html")}}
        }
    }
});
