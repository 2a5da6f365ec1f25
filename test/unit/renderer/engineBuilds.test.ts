import {describe, expect, test} from "vitest";
import type {BuildInfo, EngineBuild, EngineBuilds} from "../../../preload/contract.js";
import {engineBuildOptions} from "../../../renderer/lib/engineBuildOptions.js";
import {createEngineBuilds} from "../../../renderer/state/engineBuilds.svelte.js";
import {createFakeBridge} from "./fakeBridge.js";

const build = (backend: EngineBuild["backend"], folder: string, reason: string | null = null): EngineBuild => ({
    backend,
    folder,
    usable: reason == null,
    reason,
    config: reason == null ? "portable" : null,
    builtAt: null
});

/** CUDA stale, Vulkan and CPU usable: what a Linux machine with an old CUDA build would list. */
const present = (choice: EngineBuilds["choice"] = "auto"): EngineBuilds => ({
    choice,
    autoOrder: ["cuda", "vulkan", "cpu"],
    builds: [
        build("cuda", "linux-x64-cuda", "Stale: built from patch series 0000, this version needs 1111 (rebuild with npm run build:native)"),
        build("vulkan", "linux-x64-vulkan"),
        build("cpu", "linux-x64")
    ]
});
const cpu: BuildInfo = {
    kind: "local",
    gpu: false,
    patched: true,
    llamaCppRelease: "v0.5.0",
    seriesHash: "1111",
    requested: "auto",
    fallback: null
};

describe("the engine-build choices", () => {
    test("auto comes first with the order it tries and what it runs now; unusable builds are there, disabled, with their reason", () => {
        expect(engineBuildOptions(present(), cpu)).toEqual([
            {value: "auto", label: "Auto (runs CPU): CUDA, then Vulkan, then CPU", disabled: false, reason: null},
            {
                value: "cuda",
                label: "CUDA: unavailable, stale: built from patch series 0000, this version needs 1111 (rebuild with npm run build:native)",
                disabled: true,
                reason: "Stale: built from patch series 0000, this version needs 1111 (rebuild with npm run build:native)"
            },
            {value: "vulkan", label: "Vulkan (patched, portable build)", disabled: false, reason: null},
            {value: "cpu", label: "CPU (patched, portable build)", disabled: false, reason: null}
        ]);
        // With a backend chosen, auto does not claim what runs.
        expect(engineBuildOptions(present("cpu"), {...cpu, requested: "cpu"})[0]!.label).toBe("Auto: CUDA, then Vulkan, then CPU");
    });

    test("a stored choice whose build has gone is still shown, disabled", () => {
        const options = engineBuildOptions({...present("metal"), autoOrder: ["metal", "cpu"], builds: [build("cpu", "mac-arm64")]}, null);
        expect(options.map((option) => [option.value, option.disabled])).toEqual([
            ["auto", false],
            ["cpu", false],
            ["metal", true]
        ]);
        expect(options.at(-1)!.label).toBe("Metal: no build present");
    });
});

describe("engine builds state", () => {
    test("reads the builds, applies a choice and keeps the answer", async () => {
        const bridge = createFakeBridge();
        bridge.reply("engine:builds", present());
        const engineBuilds = createEngineBuilds(bridge.api);
        await engineBuilds.load();
        expect(engineBuilds.state.builds?.choice).toBe("auto");

        let finish: () => void = () => {};
        bridge.handle(
            "engine:setBuild",
            ({build: choice}) => new Promise((resolve) => (finish = () => resolve({ok: true, value: present(choice)})))
        );
        const choosing = engineBuilds.choose("vulkan");
        expect(engineBuilds.state.switching).toBe("vulkan");
        // One change at a time.
        expect(await engineBuilds.choose("cpu")).toBe(false);
        finish();
        expect(await choosing).toBe(true);
        expect(engineBuilds.state).toMatchObject({switching: null, error: null, builds: {choice: "vulkan"}});
        expect(bridge.calls.filter((call) => call.channel === "engine:setBuild").map((call) => call.payload)).toEqual([{build: "vulkan"}]);
    });

    test("says why a choice failed, and reads the builds again", async () => {
        const bridge = createFakeBridge();
        bridge.reply("engine:builds", present());
        const engineBuilds = createEngineBuilds(bridge.api);
        await engineBuilds.load();
        bridge.fail("engine:setBuild", "BUSY", "Stop the current answer before changing the engine build");
        expect(await engineBuilds.choose("cpu")).toBe(false);
        expect(engineBuilds.state.error).toBe(
            "Could not change the engine build: Stop the current answer before changing the engine build"
        );
        expect(engineBuilds.state.switching).toBeNull();
        expect(bridge.calls.filter((call) => call.channel === "engine:builds")).toHaveLength(2);

        bridge.fail("engine:builds", "INTERNAL", "boom");
        const fresh = createEngineBuilds(bridge.api);
        await fresh.load();
        expect(fresh.state).toMatchObject({builds: null, error: "Could not list the engine builds: boom"});
    });
});
