// The engine build end to end (Chromium against the headless backend): the status bar names the build running, the
// Engine panel lists the builds present and restarts the engine on the one chosen, from the keyboard. This machine has
// only the patched CPU build (no GPU): the GPU entries are tested with fake folders in test/unit/main/engineBuilds.test.ts.
import path from "node:path";
import {describe, expect, it} from "vitest";
import {REPO_ROOT} from "../fixtures/gguf/fixtures.js";
import {useApp} from "./appFixture.js";

const demoModel = path.join(REPO_ROOT, "resources", "models", "ponder-demo.gguf");

describe("the engine build", () => {
    const ponder = useApp("build");

    it("is named in the status bar, listed in the Engine panel, and chosen there with the keyboard", async () => {
        await ponder.start({model: demoModel});
        const {page, chat: app, errors} = await ponder.open({viewport: {width: 1280, height: 800}});
        await app.byId("engine-state").filter({hasText: /ready/i}).waitFor();
        const status = app.byId("engine-build");
        await expect(status.textContent()).resolves.toMatch(/^\s*CPU \(patched\)\s*$/);

        // The status bar's build opens the panel; the select offers auto and the CPU build, auto naming what it runs.
        await status.click();
        await app.byId("engine-panel").waitFor();
        const select = app.byId("engine-build-select");
        await select.waitFor();
        await expect(select.inputValue()).resolves.toBe("auto");
        const options = await select.locator("option").evaluateAll((nodes) =>
            nodes.map((node) => ({
                value: (node as HTMLOptionElement).value,
                label: node.textContent!.trim(),
                disabled: (node as HTMLOptionElement).disabled
            }))
        );
        expect(options[0]).toEqual({value: "auto", label: "Auto (runs CPU): CUDA, then Vulkan, then CPU", disabled: false});
        expect(options).toContainEqual({
            value: "cpu",
            label: expect.stringMatching(/^CPU \(patched, (native|portable) build\)$/),
            disabled: false
        });
        const cpuBuild = app.byId("engine-builds").locator("li[data-backend=cpu][data-usable=true]");
        await expect(cpuBuild.locator("code").textContent()).resolves.toBe("linux-x64");
        expect(await page.getByLabel("Engine build").count()).toBe(1);

        // From the keyboard: Tab from the panel to the select, the arrow to the CPU build; the engine process restarts
        // on it and loads the model again.
        const enginePid = ponder.backend.enginePid();
        for (let i = 0; i < 5 && !(await select.evaluate((node) => node === document.activeElement)); i++) await page.keyboard.press("Tab");
        await expect(select.evaluate((node) => node === document.activeElement)).resolves.toBe(true);
        await page.keyboard.press("ArrowDown");
        await page.waitForFunction(
            () =>
                document.querySelector("[data-testid=engine-state]")?.textContent === "ready" &&
                document.querySelector<HTMLSelectElement>("[data-testid=engine-build-select]")?.value === "cpu" &&
                !document.querySelector<HTMLSelectElement>("[data-testid=engine-build-select]")?.disabled,
            null,
            {timeout: 60_000}
        );
        expect(ponder.backend.enginePid()).not.toBe(enginePid);
        await expect(status.textContent()).resolves.toMatch(/^\s*CPU \(patched\)\s*$/);
        await expect(app.byId("engine-message").textContent()).resolves.toBe("The engine now runs the CPU build (patched).");
        await expect(page.locator("[data-testid=model-item].loaded").count()).resolves.toBe(1);
        // Auto no longer claims what runs: CPU was chosen.
        await expect(select.locator("option[value=auto]").textContent()).resolves.toBe("Auto: CUDA, then Vulkan, then CPU");
        await page.screenshot({path: ponder.artifact("engine-build.png")});

        // The choice is stored: a new backend on the same data starts on it.
        await ponder.backend.stop();
        await ponder.start();
        await page.goto(ponder.backend.url);
        await app.byId("engine-state").filter({hasText: /ready/i}).waitFor();
        await app.byId("engine-build").click();
        await expect(app.byId("engine-build-select").inputValue()).resolves.toBe("cpu");
        expect(errors).toEqual([]);
    });
});
