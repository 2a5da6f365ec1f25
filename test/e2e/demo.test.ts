// A fresh install in the browser: no model given, the many-task model Ponder ships loads, and a held-out problem asked
// in words is answered correctly with its thinking shown, as a person would see it.
import {expect, it} from "vitest";
import {isDemoAnswerCorrect} from "../eval/demoTask.js";
import {multiSampleProblem} from "../../main/demo/shippedModelSample.js";
import {useApp} from "./appFixture.js";

const app = useApp("demo");

it("loads the many-task model on a fresh install and answers a held-out problem with its thinking", async () => {
    await app.start({seed: 7});
    const {page, chat} = await app.open();
    await chat.byId("engine-state").filter({hasText: /ready/i}).waitFor({timeout: 60_000});
    expect(await chat.byId("model-item").allTextContents()).toEqual([expect.stringContaining("Ponder Reasoner")]);

    // At 900 px of height, the model's details leave its row in view, and Escape closes them from anywhere on the page;
    // Escape also closes the Server and Engine panels with focus outside them.
    await page.setViewportSize({width: 1400, height: 900});
    await chat.byId("model-details-button").click();
    await chat.byId("model-details").waitFor();
    // What LM Studio shows too: the parameter count and the quantization.
    await expect
        .poll(() => chat.byId("model-details").textContent(), {timeout: 15_000})
        .toMatch(/Parameters\s*[\d.]+ [KMB].*Quantization\s*(F16|F32|BF16|Q\w+)/s);
    const row = await chat.byId("model-item").boundingBox();
    expect(row?.height).toBeGreaterThan(30);
    await page.screenshot({path: app.artifact("model-details-900.png")});
    const blur = () => page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    await blur();
    await page.keyboard.press("Escape");
    await expect.poll(() => chat.byId("model-details-button").getAttribute("aria-expanded")).toBe("false");
    for (const panel of ["server", "engine"]) {
        await chat.byId(panel === "server" ? "server-button" : "engine-build").click();
        await chat.byId(`${panel}-panel`).waitFor();
        await blur();
        await page.keyboard.press("Escape");
        await chat.byId(`${panel}-panel`).waitFor({state: "detached"});
    }

    // A program of 23 to 25 steps asked in words (a seed past the samples'), in a new conversation's first budget.
    const problem = multiSampleProblem(0x80000000 + 500, "program");
    await chat.newConversation();
    // Greedy decoding for this conversation, from the generation panel (Ctrl+Shift+G).
    await page.keyboard.press("Control+Shift+G");
    await chat.byId("generation-panel").waitFor();
    await chat.byId("temperature").fill("5");
    await chat.byId("apply-generation").click();
    expect(await chat.byId("temperature-error").textContent()).toMatch(/between 0 and 2/);
    expect(await chat.byId("generation-error").textContent()).toMatch(/Correct the field marked in red/);
    await chat.byId("temperature").fill("0");
    await chat.byId("apply-generation").click();
    await chat
        .byId("generation-panel")
        .getByText(/Applied to this conversation, from its next answer/)
        .waitFor();
    await expect.poll(() => chat.byId("generation-button").textContent()).toContain("T 0");
    await page.screenshot({path: app.artifact("generation.png")});
    await page.keyboard.press("Escape");
    await chat.byId("generation-panel").waitFor({state: "detached"});

    await chat.send(problem.question);
    await chat.byId("thinking-block").first().waitFor();
    await chat.waitForAnswerDone();

    const assistant = chat.lastAssistant();
    if ((await assistant.getByTestId("thinking-content").count()) === 0) await assistant.getByTestId("thinking-toggle").click();
    const thinking = (await assistant.getByTestId("thinking-content").textContent())!;
    // One line per step of the program, each ending in the two-digit sum.
    expect(thinking.match(/=\d\d/g)?.length).toBeGreaterThanOrEqual(20);
    const answer = (await assistant.getByTestId("answer-content").textContent())!.trim();
    expect(isDemoAnswerCorrect(problem, answer)).toBe(true);
    await page.screenshot({path: app.artifact("demo.png"), fullPage: true});

    // The setting is the conversation's, stored: still there after a reload.
    await page.reload();
    await chat.conversationItems().first().click();
    await chat.byId("generation-button").click();
    expect(await chat.byId("temperature").inputValue()).toBe("0");
    await page.keyboard.press("Escape");

    // A new conversation with the many-task model says what it can do and offers a problem of one of its families;
    // after the model's answer, the known one is shown.
    await chat.newConversation();
    expect(await chat.byId("demo-about").textContent()).toMatch(/six kinds of step-by-step problems asked in words/);
    await page.screenshot({path: app.artifact("demo-first-screen.png")});
    await chat.byId("try-sample").click();
    await chat.waitForAnswerDone();
    expect(await chat.byId("message-user").last().textContent()).toMatch(/[a-z]{3,} [a-z]{2,}/i);
    expect(await chat.byId("sample-answer").textContent()).toMatch(/known answer: [\d,]+ \(the .+\)/);
    await page.screenshot({path: app.artifact("demo-sample.png"), fullPage: true});

    // A small window (1024x700): nothing runs off the side, and the chat, the memory panel and the model details fit.
    await page.setViewportSize({width: 1024, height: 700});
    const overflow = () => page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(await overflow()).toBeLessThanOrEqual(0);
    await page.screenshot({path: app.artifact("small-chat.png")});
    await page.keyboard.press("Control+Shift+M");
    await chat.byId("memory-panel").waitFor();
    expect(await overflow()).toBeLessThanOrEqual(0);
    await page.screenshot({path: app.artifact("small-memory.png")});
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    await page.keyboard.press("Escape");
    await chat.byId("memory-panel").waitFor({state: "detached"});
    await chat.byId("model-details-button").click();
    await chat.byId("model-details").waitFor();
    expect((await chat.byId("model-item").boundingBox())?.height).toBeGreaterThan(30);
    await page.screenshot({path: app.artifact("small-model-details.png")});
    await page.close();
});
