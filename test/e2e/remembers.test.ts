// What an answer's memory means to a person who has never heard of a KV cache, in Chromium against the real backend:
// one line of memory against a full cache, a plain warning when the budget forced drops, the jargon behind Advanced
// details; and Compare with Full KV, which regenerates the answer under Full KV with the same seed and shows both.
import type {Page} from "playwright-core";
import {describe, expect, it} from "vitest";
import {getFixtureModel} from "../fixtures/gguf/fixtures.js";
import {useApp} from "./appFixture.js";
import type {ChatPage} from "./ChatPage.js";

describe("what an answer's memory means, and Compare with Full KV", () => {
    const app = useApp("remembers", {backend: async () => ({model: await getFixtureModel("endless"), seed: 5})});

    async function open(viewport = {width: 1400, height: 900}): Promise<{page: Page; chat: ChatPage; errors: string[]}> {
        return app.open({viewport, ready: true});
    }

    async function setPolicy(chat: ChatPage, policy: string, cells: number): Promise<void> {
        if ((await chat.byId("budget-controller").count()) === 0) await chat.byId("memory-button").click();
        await chat.byId("budget-controller").waitFor();
        await chat.byId("policy-select").selectOption(policy);
        await chat.byId("budget-kind").selectOption("cells");
        await chat.byId("budget-value").fill(String(cells));
        await chat.byId("apply-budget").click();
        await chat
            .byId("budget-controller")
            .getByText(/^Applied to this conversation: its next answer runs under/)
            .waitFor();
        await chat.page.keyboard.press("Escape");
        await chat.byId("memory-panel").waitFor({state: "detached"});
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
        await chat.page.keyboard.press("Escape");
        await chat.byId("generation-panel").waitFor({state: "detached"});
    }

    it("says in one line how much memory an answer used, warns plainly when the budget was full, and keeps the jargon in Advanced details", async () => {
        const {page, chat, errors} = await open();
        await chat.newConversation();
        await setMaxTokens(chat, 300);
        await setPolicy(chat, "lethe", 128);
        await chat.send("Think about this for a long while");
        await chat.waitForAnswerDone();
        const answer = chat.lastAssistant();

        const line = (await answer.getByTestId("message-footprint").textContent())!.trim();
        expect(line).toMatch(/^Used [\d.]+ MiB of memory, \d+% less than a full cache \([\d.]+ MiB\)$/);
        expect(line).not.toMatch(/forced|prune|round|dropped|combine/i);
        // 300 tokens in 128 cells under Lethe: the budget was full and freed tokens the policy would have kept.
        expect(await answer.getByTestId("message-may-differ").textContent()).toBe(
            "The memory budget was full, so this answer may differ from the one a full cache gives."
        );

        // The jargon is one keyboard press away, not in the line.
        const advanced = answer.getByTestId("message-advanced");
        expect(await advanced.evaluate((element) => (element as HTMLDetailsElement).open)).toBe(false);
        await advanced.locator("summary").focus();
        await page.keyboard.press("Enter");
        expect(await advanced.evaluate((element) => (element as HTMLDetailsElement).open)).toBe(true);
        const jargon = (await advanced.textContent())!;
        expect(jargon).toMatch(
            /\d[\d,]* prune rounds · [\d,]+ evicted · [1-9][\d,]* forced drops \(freed by the full budget, not chosen by the policy\)/
        );
        expect(jargon).toMatch(/layers combined by/);
        await page.screenshot({path: app.artifact("remembers-words-1400.png")});
        await page.setViewportSize({width: 1024, height: 700});
        await answer.getByTestId("message-footprint").scrollIntoViewIfNeeded();
        await page.screenshot({path: app.artifact("remembers-words-1024.png")});
        expect(errors).toEqual([]);
        await page.close();
    });

    it("shows which of the conversation's tokens the model still remembers, live while it thinks, by pointer and by keyboard", async () => {
        const {page, chat, errors} = await open();
        await chat.newConversation();
        await setMaxTokens(chat, 2000);
        await setPolicy(chat, "lethe", 128);
        await chat.byId("memory-button").click();
        await chat.byId("memory-panel").waitFor();
        expect(await chat.byId("memory-panel").getByRole("heading", {name: "What the model still remembers"}).count()).toBe(1);
        await chat.send("Think about this for a long while");
        const strip = chat.byId("remember-strip");
        // While the model thinks: the strip follows, and what the budget evicted shows as it goes.
        await expect
            .poll(
                async () => (await strip.getAttribute("data-live")) === "true" && (await strip.getAttribute("data-evicted"))!.length > 0,
                {timeout: 60_000}
            )
            .toBe(true);
        const liveTokens = Number(await strip.getAttribute("data-tokens"));
        await expect.poll(async () => Number(await strip.getAttribute("data-tokens")), {timeout: 60_000}).toBeGreaterThan(liveTokens);
        await page.screenshot({path: app.artifact("remembers-strip-live-1400.png")});
        await chat.byId("stop-button").click();
        await chat.waitForAnswerDone();
        await expect.poll(() => strip.getAttribute("data-live")).toBe("false");
        const tokens = Number(await strip.getAttribute("data-tokens"));
        const evicted = (await strip.getAttribute("data-evicted"))!.split(",").map(Number);
        // 128 cells hold at most 128 of the tokens: the rest were evicted, in ranges the strip draws pale.
        let forgotten = 0;
        for (let i = 0; i < evicted.length; i += 2) forgotten += evicted[i + 1]! - evicted[i]!;
        expect(tokens - forgotten).toBeLessThanOrEqual(128);
        expect(await chat.byId("remember-readout").textContent()).toMatch(
            new RegExp(`^Remembers ${(tokens - forgotten).toLocaleString("en-US")} of ${tokens.toLocaleString("en-US")} tokens: `)
        );

        // The keyboard walks the tokens: End is the newest (still in memory), Home the oldest.
        await strip.focus();
        await page.keyboard.press("End");
        expect(await chat.byId("remember-readout").textContent()).toMatch(
            new RegExp(`^Token ${tokens.toLocaleString("en-US")} of [\\d,]+, in the answer · 0 tokens old · still in memory$`)
        );
        await page.keyboard.press("Home");
        expect(await chat.byId("remember-readout").textContent()).toMatch(/^Token 1 of [\d,]+, in the prompt · [\d,]+ tokens old · /);
        // The pointer: the middle of the longest evicted range.
        let longest = 0;
        for (let i = 2; i < evicted.length; i += 2)
            longest = evicted[i + 1]! - evicted[i]! > evicted[longest + 1]! - evicted[longest]! ? i : longest;
        const middle = (evicted[longest]! + evicted[longest + 1]!) / 2;
        const box = (await strip.boundingBox())!;
        await page.mouse.move(box.x + (middle / tokens) * box.width, box.y + box.height / 2);
        expect(await chat.byId("remember-readout").textContent()).toMatch(/ · [\d,]+ tokens old · forgotten \(evicted from memory\)$/);
        await page.screenshot({path: app.artifact("remembers-strip-1400.png")});
        await page.setViewportSize({width: 1024, height: 700});
        await strip.scrollIntoViewIfNeeded();
        await page.screenshot({path: app.artifact("remembers-strip-1024.png")});
        await page.keyboard.press("Escape");
        await chat.byId("memory-panel").waitFor({state: "detached"});

        // In the thought itself: Show what was forgotten fades the evicted spans; the newest stay.
        const answer = chat.lastAssistant();
        await answer.getByTestId("thinking-toggle").click();
        const toggle = answer.getByTestId("show-forgotten");
        expect(await toggle.getAttribute("aria-pressed")).toBe("false");
        await toggle.focus();
        await page.keyboard.press("Enter");
        expect(await toggle.getAttribute("aria-pressed")).toBe("true");
        const content = answer.getByTestId("thinking-content");
        expect(await content.locator("[data-forgotten=true]").count()).toBeGreaterThan(0);
        expect(await content.locator("span").last().getAttribute("data-forgotten")).toBe("false");
        // The text is the thought's, whole: only its shading changed.
        const whole = await content.textContent();
        await page.keyboard.press("Enter");
        expect(await content.locator("[data-forgotten]").count()).toBe(0);
        expect(await content.textContent()).toBe(whole);
        await page.keyboard.press("Enter");
        await content.evaluate((element) => (element.scrollTop = element.scrollHeight / 2));
        await page.screenshot({path: app.artifact("remembers-forgotten-1024.png")});
        await page.setViewportSize({width: 1400, height: 900});
        await page.screenshot({path: app.artifact("remembers-forgotten-1400.png")});
        expect(errors).toEqual([]);
        await page.close();
    });

    it("tells of a token its age, its score under the policy and which layers kept it, and steps through the prune rounds, by pointer and by keyboard", async () => {
        const {page, chat, errors} = await open();
        await chat.newConversation();
        await setMaxTokens(chat, 300);
        await setPolicy(chat, "lethe", 128);
        await chat.send("Think about this for a long while");
        await chat.waitForAnswerDone();
        await chat.byId("memory-button").click();
        await chat.byId("memory-panel").waitFor();
        const strip = chat.byId("remember-strip");
        await expect.poll(() => strip.getAttribute("data-live")).toBe("false");
        // The gauge says in plain words what a full budget means for the answer.
        expect(await chat.byId("memory-gauge").textContent()).not.toMatch(/forced/i);
        await chat.byId("memory-gauge").screenshot({path: app.artifact("remembers-gauge.png")});
        const tokens = Number(await strip.getAttribute("data-tokens"));
        const evicted = (await strip.getAttribute("data-evicted"))!.split(",").map(Number);
        const readout = chat.byId("remember-readout");
        const detail = chat.byId("remember-detail");
        expect(await detail.count()).toBe(0);

        // The keyboard: the first token (never evicted) was scored by the last round; its score is Lethe's, with the layers that kept it.
        await strip.focus();
        await page.keyboard.press("Home");
        expect(await readout.textContent()).toMatch(/^Token 1 of [\d,]+, in the prompt · [\d,]+ tokens old · still in memory$/);
        const first = (await detail.textContent())!;
        expect(await strip.getAttribute("aria-valuetext")).toContain(first);
        const lastRound =
            /^Lethe's score \(attention received\) [\d.e+-]+ at round ([\d,]+) of ([\d,]+) · layers whose own ranking would keep it: (all \d+|none|[\d, –]+ \(\d+ of \d+\))$/.exec(
                first
            );
        expect(lastRound, first).not.toBeNull();
        expect(lastRound![1]).toBe(lastRound![2]);
        const rounds = Number(lastRound![2]!.replace(/,/g, ""));
        expect(rounds).toBeGreaterThan(1);
        // The pointer: a token in the middle of the longest evicted range, whose score is that of the round that evicted it.
        let longest = 0;
        for (let i = 2; i < evicted.length; i += 2)
            longest = evicted[i + 1]! - evicted[i]! > evicted[longest + 1]! - evicted[longest]! ? i : longest;
        const middle = (evicted[longest]! + evicted[longest + 1]!) / 2;
        const box = (await strip.boundingBox())!;
        await page.mouse.move(box.x + (middle / tokens) * box.width, box.y + box.height / 2);
        expect(await readout.textContent()).toMatch(/ · [\d,]+ tokens old · forgotten \(evicted from memory\)$/);
        expect(await detail.textContent()).toMatch(/^Lethe's score \(attention received\) [\d.e+-]+ at round [\d,]+ of [\d,]+ · /);
        await page.screenshot({path: app.artifact("remembers-token-1400.png")});
        await page.mouse.move(0, 0);
        expect(await detail.count()).toBe(0);

        // The rounds: the slider starts at the answer's end; Home is after the first round, the arrows step one round.
        const scrubber = chat.byId("round-scrubber");
        const roundReadout = chat.byId("round-readout");
        expect(await scrubber.getAttribute("max")).toBe(String(rounds));
        expect(await scrubber.inputValue()).toBe(String(rounds));
        expect(await roundReadout.textContent()).toBe(`At the end of the answer, after all ${rounds} prune rounds`);
        const forgotten = async () => {
            const ranges = (await strip.getAttribute("data-evicted"))!
                .split(",")
                .filter((part) => part !== "")
                .map(Number);
            let sum = 0;
            for (let i = 0; i < ranges.length; i += 2) sum += ranges[i + 1]! - ranges[i]!;
            return {tokens: Number(await strip.getAttribute("data-tokens")), forgotten: sum};
        };
        await scrubber.focus();
        await page.keyboard.press("Home");
        expect(await roundReadout.textContent()).toMatch(/^After round 1 of [\d,]+, [\d,]+ tokens? into the answer$/);
        let before = await forgotten();
        expect(before.tokens).toBeLessThan(tokens);
        for (let step = 2; step <= Math.min(rounds, 6); step++) {
            await page.keyboard.press("ArrowRight");
            expect(await roundReadout.textContent()).toMatch(new RegExp(`^After round ${step} of `));
            const now = await forgotten();
            // Each round holds at most the budget, and what was forgotten stays forgotten.
            expect(now.tokens - now.forgotten).toBeLessThanOrEqual(128);
            expect(now.tokens).toBeGreaterThanOrEqual(before.tokens);
            expect(now.forgotten).toBeGreaterThanOrEqual(before.forgotten);
            before = now;
        }
        expect(await readout.textContent()).toMatch(/^Remembers [\d,]+ of [\d,]+ tokens: /);
        await page.screenshot({path: app.artifact("remembers-rounds-1400.png")});
        await page.setViewportSize({width: 1024, height: 700});
        await scrubber.scrollIntoViewIfNeeded();
        await page.screenshot({path: app.artifact("remembers-rounds-1024.png")});
        await page.keyboard.press("End");
        expect(await roundReadout.textContent()).toBe(`At the end of the answer, after all ${rounds} prune rounds`);
        expect(Number(await strip.getAttribute("data-tokens"))).toBe(tokens);
        expect(errors).toEqual([]);
        await page.close();
    });

    it("keeps Full KV for a model without retention gates, and points to calibrating its retention in the model's details", async () => {
        const {page, chat, errors} = await open();
        await chat.newConversation();
        await chat.byId("memory-button").click();
        await chat.byId("budget-controller").waitFor();
        expect(await chat.byId("policy-select").inputValue()).toBe("full");
        expect((await chat.byId("calibrate-hint").textContent())!.replace(/\s+/g, " ")).toMatch(
            /needs retention gates for this model: calibrate its retention in\s+the model's details/
        );
        await chat.byId("budget-controller").screenshot({path: app.artifact("remembers-calibrate-hint.png")});
        expect(errors).toEqual([]);
        await page.close();
    });

    it("regenerates a pruned answer under Full KV with the same seed in one click, and shows where the two part and the memory each used", async () => {
        const {page, chat, errors} = await open();
        await chat.newConversation();
        await setMaxTokens(chat, 300);
        await setPolicy(chat, "lethe", 128);
        await chat.send("Think about this for a long while");
        await chat.waitForAnswerDone();
        const checkedId = await chat.lastAssistant().getAttribute("data-message-id");
        const lethe = chat.lastAssistant().getByTestId("message-compression");
        expect(await lethe.textContent()).toMatch(/Lethe · 128 cells/);

        // One click, by the keyboard: the button is in the tab order of the answer's footer.
        const compare = chat.lastAssistant().getByTestId("compare-full");
        await compare.focus();
        await page.keyboard.press("Enter");
        await chat.byId("stop-button").waitFor();
        await chat.waitForAnswerDone();
        const full = chat.lastAssistant();
        await expect.poll(() => full.getByTestId("message-compression").textContent()).toMatch(/^\s*Full KV · [\d,]+ cells · F16\s*$/);
        expect(await chat.byId("version-count").last().textContent()).toBe("2/2");
        // The conversation itself stays under Lethe.
        expect(await chat.byId("memory-chip-next").textContent()).toBe("next: Lethe");

        const comparison = full.getByTestId("version-comparison");
        await comparison.waitFor();
        const verdict = (await full.getByTestId("comparison-verdict").textContent())!;
        expect((await full.getByTestId("comparison-memory").textContent())!.replace(/\s+/g, " ")).toMatch(
            /^\s*Memory at the end: Lethe [\d.]+ MiB · Full KV [\d.]+ MiB\s*$/
        );
        if ((await comparison.getAttribute("data-same")) === "true")
            expect(verdict).toBe("Same answer and same thought as under Lethe: nothing it dropped changed the answer.");
        else {
            expect(verdict).toMatch(/part at the word marked below/);
            // Both sides marked at the same place: the same text before the mark, and the mark in each.
            const pruned = full.getByTestId("comparison-pruned");
            const fullSide = full.getByTestId("comparison-full");
            expect(await full.getByTestId("parting-pruned").count()).toBe(1);
            expect(await full.getByTestId("parting-full").count()).toBe(1);
            const before = async (side: typeof pruned) =>
                await side.locator("p").evaluate((element) => element.firstChild?.textContent ?? "");
            expect(await before(pruned)).toBe(await before(fullSide));
            // Where they part, the two differ (a different word, or the same word followed by something else).
            const rendered = async (side: typeof pruned) => (await side.locator("p").textContent())!;
            expect(await rendered(pruned)).not.toBe(await rendered(fullSide));
        }
        await page.screenshot({path: app.artifact("remembers-compare-1400.png")});
        await page.setViewportSize({width: 1024, height: 700});
        await comparison.scrollIntoViewIfNeeded();
        await page.screenshot({path: app.artifact("remembers-compare-1024.png")});

        // Back to the version it checks, in one click.
        await full.getByTestId("show-checked-version").click();
        await expect.poll(() => chat.lastAssistant().getAttribute("data-message-id")).toBe(checkedId);
        expect(await chat.byId("version-count").last().textContent()).toBe("1/2");
        expect(errors).toEqual([]);
        await page.close();
    });
});
