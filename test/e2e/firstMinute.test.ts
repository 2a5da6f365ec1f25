// Compression from the first minute, in Chromium against the real backend on a fresh install: the many-task model has
// retention gates, so a new conversation starts under TRIM-KV at about half a sample's memory, the sample says so, and
// Compare with Full KV is one click under its answer.
import {expect, it} from "vitest";
import {multiFirstBudgetCells} from "../../main/services/firstMinuteCompression.js";
import {useApp} from "./appFixture.js";

const app = useApp("first-minute");

it("starts a new conversation with the many-task model under TRIM-KV at about half the memory, and compares the sample with Full KV in one click", async () => {
    await app.start({seed: 7});
    const {page, chat, errors} = await app.open({viewport: {width: 1400, height: 900}});
    await chat.byId("engine-state").filter({hasText: /ready/i}).waitFor({timeout: 60_000});
    await chat.newConversation();
    await expect.poll(() => chat.byId("sample-compression").count()).toBe(1);
    expect(await chat.byId("sample-compression").textContent()).toMatch(/It runs under TRIM-KV at about half the memory of a full cache\./);
    await page.screenshot({path: app.artifact("first-minute-empty-1400.png")});

    await chat.byId("memory-button").click();
    await chat.byId("budget-controller").waitFor();
    expect(await chat.byId("policy-select").inputValue()).toBe("trimkv");
    expect(await chat.byId("budget-value").inputValue()).toBe(String(multiFirstBudgetCells));
    expect(await chat.byId("calibrate-hint").count()).toBe(0);
    await page.keyboard.press("Escape");
    await chat.byId("memory-panel").waitFor({state: "detached"});

    await chat.byId("try-sample").click();
    await chat.waitForAnswerDone();
    const answer = chat.lastAssistant();
    expect(await answer.getByTestId("message-compression").textContent()).toContain(`TRIM-KV · ${multiFirstBudgetCells} cells`);
    const line = (await answer.getByTestId("message-footprint").textContent())!;
    const saved = Number(/(\d+)% less than a full cache/.exec(line)?.[1]);
    // About half: every family's sample is about 400 to 630 tokens (MULTI_SAMPLE_SCALES) in 256 cells.
    expect(saved).toBeGreaterThanOrEqual(30);
    expect(saved).toBeLessThanOrEqual(60);
    await page.screenshot({path: app.artifact("first-minute-answer-1400.png")});

    await answer.getByTestId("compare-full").click();
    await chat.byId("stop-button").waitFor();
    await chat.waitForAnswerDone();
    const comparison = chat.lastAssistant().getByTestId("version-comparison");
    await comparison.waitFor();
    expect(await chat.lastAssistant().getByTestId("comparison-verdict").textContent()).toMatch(/TRIM-KV/);
    expect((await chat.lastAssistant().getByTestId("comparison-memory").textContent())!.replace(/\s+/g, " ")).toMatch(
        /TRIM-KV [\d.]+ MiB · Full KV [\d.]+ MiB/
    );
    await page.screenshot({path: app.artifact("first-minute-compare-1400.png")});
    await page.setViewportSize({width: 1024, height: 700});
    await comparison.scrollIntoViewIfNeeded();
    await page.screenshot({path: app.artifact("first-minute-compare-1024.png")});
    expect(errors).toEqual([]);
    await page.close();
});
