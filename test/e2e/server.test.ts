// The API server end to end: a person turns it on in the app's Server panel (Chromium against the headless backend),
// another program sends a request with the official openai client, and the panel's log shows it with its memory.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import OpenAI from "openai";
import type {Browser} from "playwright-core";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import {heldOutDemoProblems} from "../eval/demoTask.js";
import {REPO_ROOT} from "../fixtures/gguf/fixtures.js";
import {artifacts} from "./appFixture.js";
import {launchChromium} from "./browser.js";
import {openApp} from "./ChatPage.js";
import {HeadlessPonder} from "./HeadlessPonder.js";

const demoModel = path.join(REPO_ROOT, "resources", "models", "ponder-demo.gguf");

describe("the API server from the Server panel", () => {
    let browser: Browser;
    const backends: HeadlessPonder[] = [];
    const dataDirs: string[] = [];

    beforeAll(async () => {
        fs.mkdirSync(artifacts, {recursive: true});
        browser = await launchChromium();
    });
    afterAll(async () => {
        for (const backend of backends) await backend.stop();
        await browser?.close();
        for (const dir of dataDirs) fs.rmSync(dir, {recursive: true, force: true});
    });

    function dataDir(): string {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-e2e-api-"));
        dataDirs.push(dir);
        return dir;
    }

    it("is turned on in the panel, answers the openai client, and logs the request with its memory figures", async () => {
        const backend = await HeadlessPonder.start({dataDir: dataDir(), model: demoModel});
        backends.push(backend);
        const {page, chat: app, errors} = await openApp(browser, backend.url, {viewport: {width: 1280, height: 900}});
        await app.byId("engine-state").filter({hasText: /ready/i}).waitFor();

        await app.byId("server-button").click();
        const panel = app.byId("server-panel");
        await panel.waitFor();
        await expect(app.byId("server-state").textContent()).resolves.toBe("Off");
        await expect(app.byId("server-model").textContent()).resolves.toBe("ponder-demo");
        // A free port (the default 8080 may be taken on a test machine), then on.
        await app.byId("server-port").fill("0");
        await panel.getByRole("button", {name: "Apply"}).first().click();
        await app.byId("server-toggle").check();
        await app.byId("server-state").filter({hasText: "Listening"}).waitFor();
        const url = (await app.byId("server-url").textContent())!.trim();
        expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
        await expect(app.byId("server-button").textContent()).resolves.toContain("API 127.0.0.1:");

        // A draft being typed survives the status events a request brings (the engine starting and finishing).
        await app.byId("server-cells").fill("2048");
        const client = new OpenAI({baseURL: url, apiKey: "local", maxRetries: 0});
        const problem = heldOutDemoProblems(1, {minSteps: 40, maxSteps: 45}, 900)[0]!;
        const completion = await client.chat.completions.create({
            model: "ponder-demo",
            messages: [{role: "user", content: problem.question}],
            temperature: 0,
            ponder: {policy: "lethe", budget: {cells: 320}}
        } as OpenAI.ChatCompletionCreateParamsNonStreaming);
        expect(completion.choices[0]!.finish_reason).toBe("stop");
        const kv = (completion.usage as unknown as {kv: {tokens_evicted: number}}).kv;
        expect(kv.tokens_evicted).toBeGreaterThan(0);

        const entry = app.byId("server-log").locator("li[data-state=done]").first();
        await entry.waitFor();
        const figures = (await entry.getByTestId("server-log-figures").textContent())!.replace(/\s+/g, " ");
        expect(figures).toContain(`${completion.usage!.completion_tokens_details!.reasoning_tokens} tokens thinking`);
        expect(figures).toMatch(/Lethe/);
        expect(figures).toMatch(/KV \d+(\.\d+)?% saved/);
        await expect(app.byId("server-cells").inputValue()).resolves.toBe("2048");
        const gaugeSavings = (await app.byId("server-gauge").getByTestId("gauge-savings").textContent())!;
        expect(gaugeSavings).toMatch(/^\d+(\.\d+)?%$/);
        await app.byId("server-toggle").scrollIntoViewIfNeeded();
        await page.screenshot({path: path.join(artifacts, "server-panel-top.png"), fullPage: false});
        await entry.scrollIntoViewIfNeeded();
        await page.screenshot({path: path.join(artifacts, "server-panel.png"), fullPage: false});
        expect(errors).toEqual([]);
        await page.close();
    });

    it("starts with --serve in headless mode", async () => {
        const backend = await HeadlessPonder.start({dataDir: dataDir(), model: demoModel, servePort: 0});
        backends.push(backend);
        expect(backend.api).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
        const client = new OpenAI({baseURL: backend.api!, apiKey: "local", maxRetries: 0});
        const models = await client.models.list();
        expect(models.data.map((model) => model.id)).toEqual(["ponder-demo"]);
    });
});
