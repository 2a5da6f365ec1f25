import {defineConfig} from "vitest/config";
import {svelte} from "@sveltejs/vite-plugin-svelte";

// Six projects; five run in this order by `npm test` (test/run.sh): fast unit tests, renderer state tests, engine tests on
// generated models, native-engine tests on the patched build, end-to-end tests in Chromium; the sixth, the Vulkan
// build against the CPU build, runs by `npm run test:vulkan`.
export default defineConfig({
    test: {
        projects: [
            {
                test: {
                    name: "unit",
                    include: ["test/unit/**/*.test.ts"],
                    exclude: ["test/unit/renderer/**"],
                    environment: "node",
                    testTimeout: 30_000
                }
            },
            {
                // Renderer state modules use runes: compile them as the browser would.
                plugins: [svelte()],
                resolve: {conditions: ["browser"]},
                test: {name: "renderer", include: ["test/unit/renderer/**/*.test.ts"], environment: "node", testTimeout: 30_000}
            },
            {
                test: {
                    name: "engine",
                    include: ["test/engine/**/*.test.ts"],
                    environment: "node",
                    testTimeout: 180_000,
                    hookTimeout: 180_000,
                    fileParallelism: false
                }
            },
            {
                test: {
                    name: "native",
                    include: ["test/native/**/*.test.ts"],
                    environment: "node",
                    testTimeout: 300_000,
                    hookTimeout: 300_000,
                    fileParallelism: false
                }
            },
            // The Vulkan build on the machine's Vulkan device (lavapipe without a GPU); not part of `npm test`: `npm run test:vulkan`.
            {
                test: {
                    name: "vulkan",
                    include: ["test/vulkan/**/*.test.ts"],
                    environment: "node",
                    testTimeout: 600_000,
                    hookTimeout: 300_000,
                    fileParallelism: false
                }
            },
            {
                test: {
                    name: "e2e",
                    include: ["test/e2e/**/*.test.ts"],
                    globalSetup: ["test/e2e/globalSetup.ts"],
                    environment: "node",
                    testTimeout: 240_000,
                    hookTimeout: 240_000,
                    fileParallelism: false
                }
            }
        ]
    }
});
