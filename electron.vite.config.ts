import {resolve} from "node:path";
import {defineConfig} from "electron-vite";
import {svelte} from "@sveltejs/vite-plugin-svelte";

// Ponder's layout is not electron-vite's default `src/{main,preload,renderer}`, so every entry is explicit.
export default defineConfig({
    main: {
        build: {
            outDir: "out/main",
            externalizeDeps: true,
            rollupOptions: {input: {index: resolve(import.meta.dirname, "main/index.ts"), headless: resolve(import.meta.dirname, "main/headless.ts"),
                engineProcess: resolve(import.meta.dirname, "main/engineProcess.ts")}}
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
