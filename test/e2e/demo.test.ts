// A fresh install in the browser: no model given, the embedded demo model loads, and a held-out problem is
// answered correctly with its thinking shown, as a person would see it.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type {Browser} from "playwright-core";
import {afterAll, beforeAll, expect, it} from "vitest";
import {heldOutDemoProblems, isDemoAnswerCorrect} from "../eval/demoTask.js";
import {launchChromium} from "./browser.js";
import {openApp} from "./ChatPage.js";
import {HeadlessPonder} from "./HeadlessPonder.js";

const artifacts = path.resolve(import.meta.dirname, "../../test-results/e2e");
let browser: Browser;
let backend: HeadlessPonder | null = null;
let dataDir: string;

beforeAll(async () => {
    fs.mkdirSync(artifacts, {recursive: true});
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-e2e-demo-"));
    browser = await launchChromium();
});
afterAll(async () => {
    await backend?.stop();
    await browser?.close();
    fs.rmSync(dataDir, {recursive: true, force: true});
});

it("loads the demo model on a fresh install and answers a held-out problem with its thinking", async () => {
    backend = await HeadlessPonder.start({dataDir, seed: 7});
    const {page, chat} = await openApp(browser, backend.url);
    await chat.byId("engine-state").filter({hasText: /ready/i}).waitFor({timeout: 60_000});
    expect(await chat.byId("model-item").allTextContents()).toEqual([expect.stringContaining("Ponder Demo Reasoner")]);

    const problem = heldOutDemoProblems(1, {minSteps: 20, maxSteps: 30}, 500)[0]!;
    await chat.newConversation();
    // Greedy decoding for this conversation, from the generation panel (Ctrl+Shift+G).
    await page.keyboard.press("Control+Shift+G");
    await chat.byId("generation-panel").waitFor();
    await chat.byId("temperature").fill("5");
    await chat.byId("apply-generation").click();
    expect(await chat.byId("generation-error").textContent()).toMatch(/between 0 and 2/);
    await chat.byId("temperature").fill("0");
    await chat.byId("apply-generation").click();
    await chat.byId("generation-panel").getByText(/takes effect with the next answer/).waitFor();
    await expect.poll(() => chat.byId("generation-button").textContent()).toContain("T 0");
    await page.screenshot({path: path.join(artifacts, "generation.png")});
    await page.keyboard.press("Escape");
    await chat.byId("generation-panel").waitFor({state: "detached"});

    await chat.send(problem.question);
    await chat.byId("thinking-block").first().waitFor();
    await chat.waitForAnswerDone();

    const assistant = chat.lastAssistant();
    if (await assistant.getByTestId("thinking-content").count() === 0)
        await assistant.getByTestId("thinking-toggle").click();
    const thinking = (await assistant.getByTestId("thinking-content").textContent())!;
    // One line per step of the program, each ending in the two-digit sum.
    expect(thinking.match(/=\d\d/g)?.length).toBeGreaterThanOrEqual(20);
    const answer = (await assistant.getByTestId("answer-content").textContent())!.trim();
    expect(isDemoAnswerCorrect(problem, answer)).toBe(true);
    await page.screenshot({path: path.join(artifacts, "demo.png"), fullPage: true});

    // The setting is the conversation's, stored: still there after a reload.
    await page.reload();
    await chat.conversationItems().first().click();
    await chat.byId("generation-button").click();
    expect(await chat.byId("temperature").inputValue()).toBe("0");
    await page.close();
});
