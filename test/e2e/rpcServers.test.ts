// RPC servers end to end (Chromium against the headless backend): an rpc-server of the engine build on loopback added
// from the Engine panel with the keyboard is checked, used (the engine restarts with it and the model's layers go
// there), and a warning in words stands next to an address that is not this machine's.
import path from "node:path";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import {REPO_ROOT} from "../fixtures/gguf/fixtures.js";
import {startRpcServer, type RpcServerProcess} from "../fixtures/rpcServers.js";
import {useApp} from "./appFixture.js";

const demoModel = path.join(REPO_ROOT, "resources", "models", "ponder-demo.gguf");

describe("RPC servers", () => {
    const ponder = useApp("rpc");
    let server: RpcServerProcess | null = null;

    beforeAll(async () => {
        server = await startRpcServer();
    });
    afterAll(() => {
        server?.child.kill("SIGKILL");
    });

    it("adds a server from the Engine panel, uses it for the model's layers, and warns about another machine's address", async () => {
        const port = server!.port;
        await ponder.start({model: demoModel});
        const {page, chat: app, errors} = await ponder.open({viewport: {width: 1280, height: 900}});
        await app.byId("engine-state").filter({hasText: /ready/i}).waitFor();
        await app.byId("engine-build").click();
        await app.byId("rpc-servers").waitFor();
        const input = app.byId("rpc-endpoint");

        await input.fill("10.0.0.5:50052");
        await expect(app.byId("rpc-servers").textContent()).resolves.toMatch(
            /10\.0\.0\.5 is another machine: its rpc-server has no authentication/
        );

        const enginePid = ponder.backend.enginePid();
        await input.fill(`127.0.0.1:${port}`);
        await expect(app.byId("rpc-servers").textContent()).resolves.not.toMatch(/no authentication/);
        await input.press("Enter");
        const entry = app.byId("rpc-server-list").locator(`li[data-endpoint="127.0.0.1:${port}"]`);
        await entry.waitFor({timeout: 60_000});
        await page.waitForFunction(
            (endpoint) =>
                /in use by the engine · protocol \d+\.\d+\.\d+ · 1 device/.test(
                    document.querySelector(`[data-endpoint="${endpoint}"] [data-testid=rpc-server-check]`)?.textContent ?? ""
                ),
            `127.0.0.1:${port}`,
            {timeout: 60_000}
        );
        await expect(entry.getByRole("checkbox").isChecked()).resolves.toBe(true);
        expect(ponder.backend.enginePid()).not.toBe(enginePid);
        await app.byId("engine-state").filter({hasText: /ready/i}).waitFor({timeout: 60_000});

        // An answer creates the context: its layers are on the server (auto on a CPU build offloads what fits there).
        await page.keyboard.press("Escape");
        await app.send("2+2?");
        await app.waitForAnswerDone();
        await app.byId("engine-build").click();
        const placement = app.byId("engine-placement");
        await placement.waitFor({timeout: 30_000});
        await expect(placement.textContent()).resolves.toContain(`127.0.0.1:${port} (RPC0)`);
        await page.screenshot({path: ponder.artifact("rpc-servers.png")});

        // Dropping it restarts the engine without it; the layers come back to this machine.
        await entry.getByRole("checkbox").uncheck();
        await page.waitForFunction(
            (endpoint) =>
                !document.querySelector<HTMLInputElement>(`[data-endpoint="${endpoint}"] input[type=checkbox]`)?.checked &&
                document.querySelector("[data-testid=engine-state]")?.textContent === "ready",
            `127.0.0.1:${port}`,
            {timeout: 60_000}
        );
        // "ready" may still be the state before the restart: the placement goes once the engine has restarted without it.
        await expect.poll(() => placement.count(), {timeout: 60_000}).toBe(0);
        expect(errors).toEqual([]);
    });
});
