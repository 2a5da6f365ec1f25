// LeanKV and keys and values at their own precision, through the app in headless mode: the budget controller offers
// K8V4 in one click, the answer runs under it (its footer says so), and the choice survives a reload.
import {describe, expect, it} from "vitest";
import {useApp} from "./appFixture.js";
import {getFixtureModel} from "../fixtures/gguf/fixtures.js";

describe("LeanKV with K8V4 in the app", () => {
    const app = useApp("leankv");

    it("chooses LeanKV and K8V4 in the controller, answers under them, and keeps them after a reload", async () => {
        // 64-value heads: whole 32-value blocks, so llama.cpp can quantize its cache.
        await app.start({model: await getFixtureModel("tiny-qwen3"), seed: 4});
        const {page, chat} = await app.open({viewport: {width: 1440, height: 900}});
        await chat.byId("engine-state").filter({hasText: /ready/i}).waitFor();
        await chat.newConversation();
        if ((await chat.byId("budget-controller").count()) === 0) await chat.byId("memory-button").click();
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
        await chat.byId("budget-controller").screenshot({path: app.artifact("leankv-controller.png")});

        await chat.send("Think about this for a while");
        // Random weights: the answer ends when it ends; a long one is stopped once some hundreds of characters came.
        await page.waitForFunction(
            () => {
                const answers = document.querySelectorAll("[data-testid=message-assistant]");
                const text = answers[answers.length - 1]?.textContent ?? "";
                return document.querySelector("[data-testid=stop-button]") == null || text.length > 500;
            },
            undefined,
            {timeout: 120_000}
        );
        if ((await chat.byId("stop-button").count()) > 0) await chat.byId("stop-button").click();
        await chat.waitForAnswerDone();
        expect(await chat.byId("message-compression").last().textContent()).toMatch(/LeanKV · 256 cells · K Q8_0 \/ V Q4_0/);
        expect(await chat.byId("gauge-live").textContent()).toMatch(/\d/);

        await page.reload();
        await chat.conversationItems().first().click();
        await chat.byId("message-assistant").first().waitFor();
        if ((await chat.byId("budget-controller").count()) === 0) await chat.byId("memory-button").click();
        expect(await chat.byId("policy-select").inputValue()).toBe("leankv");
        await chat.byId("budget-controller").locator("details.advanced > summary").click();
        expect(await chat.byId("kv-type-k").inputValue()).toBe("q8_0");
        expect(await chat.byId("kv-type-v").inputValue()).toBe("q4_0");
        await page.close();
    });
});
