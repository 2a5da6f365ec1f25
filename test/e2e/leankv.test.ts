// LeanKV and keys and values at their own precision, through the app in headless mode: the budget controller offers
// K8V4 in one click, the answer runs under it (its footer says so), and the choice survives a reload.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type {Browser} from "playwright-core";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import {getFixtureModel} from "../fixtures/gguf/fixtures.js";
import {launchChromium} from "./browser.js";
import {openApp} from "./ChatPage.js";
import {HeadlessPonder} from "./HeadlessPonder.js";

const artifacts = path.resolve(import.meta.dirname, "../../test-results/e2e");

describe("LeanKV with K8V4 in the app", () => {
    let browser: Browser;
    let backend: HeadlessPonder | null = null;
    let dataDir: string;

    beforeAll(async () => {
        fs.mkdirSync(artifacts, {recursive: true});
        dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-e2e-leankv-"));
        browser = await launchChromium();
    });
    afterAll(async () => {
        await backend?.stop();
        await browser?.close();
        fs.rmSync(dataDir, {recursive: true, force: true});
    });

    it("chooses LeanKV and K8V4 in the controller, answers under them, and keeps them after a reload", async () => {
        // 64-value heads: whole 32-value blocks, so llama.cpp can quantize its cache.
        backend = await HeadlessPonder.start({dataDir, model: await getFixtureModel("tiny-qwen3"), seed: 4});
        const {page, chat} = await openApp(browser, backend.url, {viewport: {width: 1440, height: 900}});
        await chat.byId("engine-state").filter({hasText: /ready/i}).waitFor();
        await chat.newConversation();
        if (await chat.byId("budget-controller").count() === 0)
            await chat.byId("memory-button").click();
        await chat.byId("budget-controller").waitFor();

        await chat.byId("policy-select").selectOption("leankv");
        await chat.byId("budget-kind").selectOption("cells");
        await chat.byId("budget-value").fill("256");
        await chat.byId("budget-controller").locator("details.advanced > summary").click();
        await chat.byId("use-k8v4").click();
        expect(await chat.byId("kv-type-k").inputValue()).toBe("q8_0");
        expect(await chat.byId("kv-type-v").inputValue()).toBe("q4_0");
        expect(await chat.byId("kv-pair-hint").textContent()).toMatch(/K8V4, LeanKV's pair.*middle tier/s);
        await chat.byId("apply-budget").click();
        await chat.byId("budget-controller").screenshot({path: path.join(artifacts, "leankv-controller.png")});

        await chat.send("Think about this for a while");
        // Random weights: the answer ends when it ends; a long one is stopped once some hundreds of characters came.
        await page.waitForFunction(() => {
            const answers = document.querySelectorAll("[data-testid=message-assistant]");
            const text = answers[answers.length - 1]?.textContent ?? "";
            return document.querySelector("[data-testid=stop-button]") == null || text.length > 500;
        }, undefined, {timeout: 120_000});
        if (await chat.byId("stop-button").count() > 0)
            await chat.byId("stop-button").click();
        await chat.waitForAnswerDone();
        expect(await chat.byId("message-compression").last().textContent()).toMatch(/LeanKV · 256 cells · K Q8_0 \/ V Q4_0/);
        expect(await chat.byId("gauge-live").textContent()).toMatch(/\d/);

        await page.reload();
        await chat.conversationItems().first().click();
        await chat.byId("message-assistant").first().waitFor();
        if (await chat.byId("budget-controller").count() === 0)
            await chat.byId("memory-button").click();
        expect(await chat.byId("policy-select").inputValue()).toBe("leankv");
        await chat.byId("budget-controller").locator("details.advanced > summary").click();
        expect(await chat.byId("kv-type-k").inputValue()).toBe("q8_0");
        expect(await chat.byId("kv-type-v").inputValue()).toBe("q4_0");
        await page.close();
    });
});
