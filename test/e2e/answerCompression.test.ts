// What a person sees of the compression each answer ran under, in Chromium against the real backend: the footer of
// each version names its own policy and budget, the Memory chip pairs the last answer's policy with its own figures
// (neutral, not a verdict), the budget controller says which conversations a change affects, the list tells
// conversations apart by date and policy; and two forms that used to misbehave: the generation panel's errors and the
// edit box of a long question.
import type {Page} from "playwright-core";
import {describe, expect, it} from "vitest";
import {getFixtureModel} from "../fixtures/gguf/fixtures.js";
import {useApp} from "./appFixture.js";
import type {ChatPage} from "./ChatPage.js";

describe("the compression an answer ran under, in the app", () => {
    const app = useApp("answer-compression", {backend: async () => ({model: await getFixtureModel("endless"), seed: 5})});

    async function open(): Promise<{page: Page; chat: ChatPage; errors: string[]}> {
        return app.open({viewport: {width: 1400, height: 900}, ready: true});
    }

    async function openMemory(chat: ChatPage): Promise<void> {
        if ((await chat.byId("budget-controller").count()) === 0) await chat.byId("memory-button").click();
        await chat.byId("budget-controller").waitFor();
    }

    async function closePanel(chat: ChatPage, testid: string): Promise<void> {
        await chat.page.keyboard.press("Escape");
        await chat.byId(testid).waitFor({state: "detached"});
    }

    async function setPolicy(chat: ChatPage, policy: string, cells: number | null): Promise<void> {
        await openMemory(chat);
        await chat.byId("policy-select").selectOption(policy);
        await chat.byId("budget-kind").selectOption(cells == null ? "auto" : "cells");
        if (cells != null) await chat.byId("budget-value").fill(String(cells));
        await chat.byId("apply-budget").click();
        await chat
            .byId("budget-controller")
            .getByText(/^Applied to this conversation: its next answer runs under/)
            .waitFor();
    }

    async function setMaxTokens(chat: ChatPage, value: number): Promise<void> {
        await chat.page.keyboard.press("Control+Shift+G");
        await chat.byId("generation-panel").waitFor();
        await chat.byId("max-tokens").fill(String(value));
        await chat.byId("apply-generation").click();
        await chat
            .byId("generation-panel")
            .getByText(/Applied to this conversation/)
            .waitFor();
        await closePanel(chat, "generation-panel");
    }

    it("shows each version's own policy and budget, and a Memory chip that never mixes the next policy with an older answer", async () => {
        const {page, chat, errors} = await open();
        await chat.newConversation();
        await setMaxTokens(chat, 300);

        // The controller says what a change affects, with real buttons for each scope.
        await openMemory(chat);
        const scope = chat.byId("budget-scope");
        expect(await scope.textContent()).toBe(
            "Apply changes this conversation only, from its next answer. New conversations start with these settings too (the saved default)."
        );
        expect((await chat.byId("apply-budget").textContent())!.trim()).toBe("Apply to this conversation");
        const saveDefault = chat.byId("save-default");
        expect((await saveDefault.textContent())!.trim()).toBe("Save as default for new conversations");
        // A button with a border and a background, not a link.
        expect(
            await saveDefault.evaluate((element) => {
                const style = getComputedStyle(element);
                const clear = "rgba(0, 0, 0, 0)";
                return style.borderTopWidth !== "0px" && style.borderTopColor !== clear && style.backgroundColor !== clear;
            })
        ).toBe(true);
        // The policy says what it keeps and when to use it; the paper is a link, not the first sentence.
        await chat.byId("policy-select").selectOption("lethe");
        expect(await scope.textContent()).toMatch(/New conversations start with Full KV, auto budget; Save as default to change that\./);
        const description = chat.byId("policy-description");
        expect(await description.textContent()).toMatch(
            /^\s*Keeps: Each layer keeps the tokens it still pays attention to.*Use it: Made for long chains of thought/s
        );
        expect(await chat.byId("policy-paper").getAttribute("href")).toBe("https://arxiv.org/abs/2511.06029");

        await setPolicy(chat, "lethe", 128);
        await chat.send("Think about this for a long while");
        await chat.waitForAnswerDone();
        const answer = chat.lastAssistant();
        await expect.poll(() => answer.getByTestId("message-compression").textContent()).toMatch(/^\s*Lethe · 128 cells · F16\s*$/);
        expect(await answer.getByTestId("message-compression").getAttribute("title")).toMatch(
            /^Ran under Lethe with 128 cells, KV cache F16; /
        );
        const footprint = (await answer.getByTestId("message-footprint").textContent())!;
        expect(footprint).toMatch(/Used [\d.]+ MiB of memory, \d+% less than a full cache/);
        expect(footprint).not.toMatch(/saved/);
        // Tokens the full budget freed are said in plain words wherever they are counted.
        const forced = Number((await chat.byId("gauge-forced-drops").textContent())!.replace(/,/g, ""));
        if (forced > 0) {
            expect(await answer.getByTestId("message-may-differ").textContent()).toMatch(/budget was full, so this answer may differ/);
            expect(await chat.byId("forced-drops-note").textContent()).toMatch(
                /^\s*The memory budget was full, so this answer may differ from the one a full cache gives\. Compare with Full KV/
            );
            expect(await chat.byId("memory-gauge").textContent()).not.toMatch(/forced/i);
        }
        expect(await chat.byId("gauge-compression").textContent()).toMatch(/Lethe · 128 cells · F16/);

        // The chip: the last answer's own policy and savings, in the chip's neutral colour.
        expect(await chat.byId("memory-chip-policy").textContent()).toBe("Lethe");
        const savings = chat.byId("memory-chip-savings");
        expect(await savings.textContent()).toMatch(/^\d+% less KV$/);
        const colour = (testid: string) => chat.byId(testid).evaluate((element) => getComputedStyle(element).color);
        expect(await colour("memory-chip-savings")).toBe(await colour("memory-chip-policy"));

        // The conversation moves to Full KV: until an answer runs under it, the chip keeps Lethe beside Lethe's figures.
        await setPolicy(chat, "full", null);
        expect(await chat.byId("memory-chip-policy").textContent()).toBe("Lethe");
        expect(await chat.byId("memory-chip-next").textContent()).toBe("next: Full KV");
        expect(await chat.byId("memory-button").getAttribute("title")).toMatch(
            /Last answer: Lethe · 128 cells · F16, KV \d+% less than a full cache\.\nNext answer in this conversation: Full KV, auto budget\./
        );
        await closePanel(chat, "memory-panel");
        await page.screenshot({path: app.artifact("answer-compression-next.png")});

        // A second version under Full KV: each version's footer names its own.
        await chat.lastAssistant().getByTestId("regenerate-button").click();
        await chat.waitForAnswerDone();
        await expect
            .poll(() => chat.lastAssistant().getByTestId("message-compression").textContent())
            .toMatch(/^\s*Full KV · [\d,]+ cells · F16\s*$/);
        expect(await chat.byId("version-count").last().textContent()).toBe("2/2");
        expect(await chat.byId("memory-chip-policy").textContent()).toBe("Full KV");
        expect(await chat.byId("memory-chip-next").count()).toBe(0);
        await page.screenshot({path: app.artifact("answer-compression-full.png")});
        await chat.lastAssistant().getByTestId("previous-version").click();
        await expect.poll(() => chat.byId("version-count").last().textContent()).toBe("1/2");
        expect(await chat.lastAssistant().getByTestId("message-compression").textContent()).toMatch(/Lethe · 128 cells · F16/);
        expect(await chat.byId("memory-chip-policy").textContent()).toBe("Lethe");
        await page.screenshot({path: app.artifact("answer-compression-lethe.png")});

        // The list: a date and the policy under each title.
        const item = chat.conversationItems().first();
        expect(await item.getByTestId("conversation-meta").textContent()).toMatch(/^\d{2}:\d{2} · Full KV$/);

        // A new conversation starts with the defaults until they are saved from the controller.
        await chat.newConversation();
        await openMemory(chat);
        expect(await chat.byId("policy-select").inputValue()).toBe("full");
        await chat.byId("policy-select").selectOption("lethe");
        await chat.byId("budget-kind").selectOption("cells");
        await chat.byId("budget-value").fill("256");
        await chat.byId("save-default").click();
        await chat
            .byId("budget-controller")
            .getByText(/^Saved: new conversations start with Lethe, 256 cells\. Existing conversations keep their own settings; Apply/)
            .waitFor();
        await chat.byId("budget-controller").screenshot({path: app.artifact("budget-scope.png")});
        await page.screenshot({path: app.artifact("budget-scope-page.png")});
        const before = await chat.conversationItems().count();
        await chat.newConversation();
        // The controller shows the new conversation's own settings once they are loaded (not the previous one's form).
        await expect.poll(() => chat.conversationItems().count()).toBe(before + 1);
        const created = await chat.conversationItems().first().getAttribute("data-conversation-id"); // newest first
        await expect.poll(() => chat.byId("budget-controller").getAttribute("data-conversation-id")).toBe(created);
        expect(await chat.byId("policy-select").inputValue()).toBe("lethe");
        expect(await chat.byId("budget-value").inputValue()).toBe("256");
        expect(await chat.byId("budget-scope").textContent()).toMatch(/New conversations start with these settings too/);
        await chat.byId("policy-select").selectOption("h2o");
        expect(await chat.byId("budget-scope").textContent()).toMatch(
            /New conversations start with Lethe, 256 cells; Save as default to change that\./
        );
        expect(errors).toEqual([]);
        await page.close();
    });

    it("explains each field in error in the generation panel, and drops an invalid draft when it closes", async () => {
        const {page, chat, errors} = await open();
        await chat.newConversation();
        await page.keyboard.press("Control+Shift+G");
        await chat.byId("generation-panel").waitFor();
        await chat.byId("temperature").fill("5");
        await chat.byId("top-k").fill("1.5");
        await chat.byId("max-tokens").fill("0");
        await chat.byId("apply-generation").click();
        // Three fields in red, three explanations, and the line by Apply counts them.
        expect(await chat.byId("generation-panel").locator("[aria-invalid=true]").count()).toBe(3);
        expect(await chat.byId("temperature-error").textContent()).toMatch(/between 0 and 2/);
        expect(await chat.byId("top-k-error").textContent()).toMatch(/Top-k must be a whole number/);
        expect(await chat.byId("max-tokens-error").textContent()).toMatch(/Max tokens must be a whole number/);
        expect(await chat.byId("generation-error").textContent()).toBe("Correct the 3 fields marked in red to apply.");
        await page.screenshot({path: app.artifact("generation-errors.png")});

        await closePanel(chat, "generation-panel");
        await page.keyboard.press("Control+Shift+G");
        await chat.byId("generation-panel").waitFor();
        expect(await chat.byId("temperature").inputValue()).toBe("0.6");
        expect(await chat.byId("max-tokens").inputValue()).toBe("32768");
        expect(await chat.byId("generation-panel").locator("[aria-invalid=true]").count()).toBe(0);
        expect(await chat.byId("generation-error").count()).toBe(0);
        await closePanel(chat, "generation-panel");
        expect(errors).toEqual([]);
        await page.close();
    });

    it("edits a long question in a box that shows it from its first line and grows with it", async () => {
        const {page, chat, errors} = await open();
        await chat.newConversation();
        await setMaxTokens(chat, 16);
        const question = Array.from({length: 14}, (_, index) => `Line ${index + 1} of a long question about pruning the KV cache.`).join(
            "\n"
        );
        await chat.byId("composer-input").fill(question);
        await chat.byId("composer-input").press("Enter");
        await chat.waitForAnswerDone();
        await chat.byId("message-user").first().hover();
        await chat.byId("edit-message").first().click();
        const box = chat.byId("edit-input");
        await box.waitFor();
        const fit = () =>
            box.evaluate((element) => {
                const area = element as HTMLTextAreaElement;
                const style = getComputedStyle(area);
                return {
                    lines: area.clientHeight / parseFloat(style.lineHeight),
                    hidden: area.scrollHeight - area.clientHeight,
                    paddingTop: parseFloat(style.paddingTop)
                };
            });
        const before = await fit();
        // All 14 lines show, none hidden above or below, with room above the first.
        expect(before.lines).toBeGreaterThanOrEqual(14);
        expect(before.hidden).toBeLessThanOrEqual(1);
        expect(before.paddingTop).toBeGreaterThanOrEqual(6);
        await page.screenshot({path: app.artifact("edit-long-question.png")});
        await box.press("End");
        await box.press("Shift+Enter");
        await box.pressSequentially("Line 15, typed.");
        const after = await fit();
        expect(after.lines).toBeGreaterThan(before.lines);
        expect(after.hidden).toBeLessThanOrEqual(1);
        expect(errors).toEqual([]);
        await page.close();
    });
});
