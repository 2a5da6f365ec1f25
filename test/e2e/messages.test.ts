// Working with messages in Chromium against the real backend: an answer cut by max tokens and continued, thinking off,
// a thinking budget, sampling presets, full-text search that opens the message, versions and branches, deleting a
// message, forking a conversation, exporting one and importing it back.
import fs from "node:fs";
import type {Page} from "playwright-core";
import {describe, expect, it} from "vitest";
import {getFixtureModel} from "../fixtures/gguf/fixtures.js";
import {useApp} from "./appFixture.js";
import type {ChatPage} from "./ChatPage.js";

describe("messages in Chromium against the real backend", () => {
    const app = useApp("messages", {backend: async () => ({model: await getFixtureModel("tiny-qwen2"), seed: 3})});

    async function open(): Promise<{page: Page; chat: ChatPage}> {
        const {page, chat, errors} = await app.open();
        await chat.byId("engine-state").filter({hasText: /ready/i}).waitFor();
        expect(errors).toEqual([]);
        return {page, chat};
    }

    async function setMaxTokens(chat: ChatPage, value: number): Promise<void> {
        await setGeneration(chat, async () => chat.byId("max-tokens").fill(String(value)));
    }

    async function setGeneration(chat: ChatPage, edit: () => Promise<void>): Promise<void> {
        await chat.page.keyboard.press("Control+Shift+G");
        await chat.byId("generation-panel").waitFor();
        await edit();
        await chat.byId("apply-generation").click();
        await chat
            .byId("generation-panel")
            .getByText(/Applied to this conversation, from its next answer/)
            .waitFor();
        await chat.page.keyboard.press("Escape");
        await chat.byId("generation-panel").waitFor({state: "detached"});
    }

    it("labels an answer cut by max tokens, keeps the label after a reload, and Continue completes it", async () => {
        const {page, chat} = await open();
        await chat.newConversation();
        await setMaxTokens(chat, 3);
        await chat.send("What is 12 times 7?");
        await chat.waitForAnswerDone();

        const assistant = chat.lastAssistant();
        await assistant.getByTestId("message-cut").waitFor();
        expect(await assistant.getByTestId("message-status").textContent()).toMatch(/Cut off at 3 tokens/);
        expect((await assistant.getByTestId("answer-content").textContent())!.trim()).toBe("");
        await page.screenshot({path: app.artifact("cut-off.png"), fullPage: true});

        // Stored as cut: still labelled after a reload.
        await page.reload();
        await chat.conversationItems().filter({hasText: "What is 12 times 7"}).first().click();
        await chat.lastAssistant().getByTestId("message-cut").waitFor();

        await setMaxTokens(chat, 400);
        await chat.lastAssistant().getByTestId("continue-button").click();
        await chat.waitForAnswerDone();
        const done = chat.lastAssistant();
        await done.getByTestId("answer-content").waitFor();
        expect((await done.getByTestId("answer-content").textContent())!.trim().length).toBeGreaterThan(0);
        expect(await done.getByTestId("message-status").count()).toBe(0);
        // The thought went on from where it was cut, in the same message.
        expect(Number(/(\d+) tokens/.exec((await done.getByTestId("thinking-stats").textContent())!)?.[1])).toBeGreaterThan(3);
        expect(await chat.byId("message-assistant").count()).toBe(1);
        // Time to first token and decode speed, with the prompt's speed in the tooltip.
        expect(await done.getByTestId("message-stats").textContent()).toMatch(
            /tok\/s · \d+ tokens · [\d.]+ s · first token (\d+ ms|[\d.]+ s)/
        );
        expect(await done.getByTestId("message-stats").getAttribute("title")).toMatch(
            /Prompt \d+ tokens read at [\d.]+ tok\/s .* decode [\d.]+ tok\/s/
        );
        await page.screenshot({path: app.artifact("continued.png"), fullPage: true});
        await page.close();
    });

    it("answers without a thought with thinking off, and saves the sampling values as a named preset", async () => {
        const {page, chat} = await open();
        await chat.newConversation();
        await setGeneration(chat, async () => {
            await chat.byId("thinking-toggle-setting").uncheck();
            await chat.byId("temperature").fill("0.3");
            await chat.byId("top-k").fill("1000.5");
            await chat.byId("apply-generation").click();
            expect(await chat.byId("top-k-error").textContent()).toMatch(/Top-k must be a whole number/);
            await chat.byId("top-k").fill("30");
            await chat.byId("preset-name").fill("Precise");
            await chat.byId("save-preset").click();
            await chat
                .byId("generation-panel")
                .getByText(/Saved the preset "Precise"/)
                .waitFor();
            expect(await chat.byId("preset-select").locator("option").allTextContents()).toContainEqual(
                expect.stringMatching(/^Precise · T 0.3 · top-p 0.95 · top-k 30/)
            );
            await page.screenshot({path: app.artifact("generation-sampling.png")});
        });
        await chat.send("What is 12 times 7?");
        await chat.waitForAnswerDone();
        const assistant = chat.lastAssistant();
        expect((await assistant.getByTestId("answer-content").textContent())!.trim().length).toBeGreaterThan(0);
        expect(await assistant.getByTestId("thinking-block").count()).toBe(0);
        // The header says thinking is off for this conversation.
        expect(await chat.byId("thinking-off-chip").textContent()).toBe("thinking off");
        await page.screenshot({path: app.artifact("thinking-off.png"), fullPage: true});

        // Stored with the conversation: still off after a reload; the preset is the app's.
        await page.reload();
        await chat.conversationItems().first().click();
        await chat.byId("generation-button").click();
        expect(await chat.byId("thinking-toggle-setting").isChecked()).toBe(false);
        expect(await chat.byId("top-k").inputValue()).toBe("30");
        expect(await chat.byId("preset-select").locator("option").count()).toBe(2);
        await page.close();
    });

    it("finds a word of an answer's thinking and opens the message with the word highlighted", async () => {
        const {page, chat} = await open();
        await chat.newConversation();
        await chat.send("Tell me about colours");
        await chat.waitForAnswerDone();
        const assistant = chat.lastAssistant();
        await assistant.getByTestId("thinking-block").waitFor();
        if (await assistant.getByTestId("thinking-content").isHidden()) await assistant.getByTestId("thinking-toggle").click();
        // The thinking holds words the user never typed; take one from it.
        const thought = (await assistant.getByTestId("thinking-content").textContent())!;
        // A whole word at the start of a token (the index splits at anything that is not a letter or a digit).
        const word = thought.match(/(?<![\p{L}\p{N}])\p{L}{5,}/gu)?.find((candidate) => !/tell|about|colours/i.test(candidate));
        expect(word).toBeTruthy();

        await chat.newConversation();
        // Once the new conversation is open (its composer focused), search from the sidebar.
        await expect
            .poll(() => page.evaluate(() => document.activeElement?.getAttribute("data-testid")), {timeout: 30_000})
            .toBe("composer-input");
        await chat.byId("conversation-search").fill(word!);
        const hit = chat.byId("search-hit").first();
        await chat.byId("search-results").waitFor();
        await expect
            .poll(() => chat.byId("search-hit").count(), {timeout: 10_000, message: `no hit for "${word}" in: ${thought}`})
            .toBeGreaterThan(0);
        expect(await hit.locator("mark").first().textContent()).toMatch(new RegExp(word!, "i"));
        expect(await hit.textContent()).toMatch(/Tell me about colours · thinking/);
        await page.screenshot({path: app.artifact("search.png")});

        await hit.click();
        const opened = page.locator("[data-message-id][data-found]");
        await opened.waitFor();
        expect(await page.locator(".chat h1").textContent()).toContain("Tell me about colours");
        // The thought is open and the word is highlighted in it.
        await opened.getByTestId("thinking-content").waitFor({state: "visible"});
        const highlighted = await page.evaluate(() => {
            const found = CSS.highlights.get("search-match");
            return found == null ? [] : [...found].map((range) => (range as Range).toString());
        });
        expect(highlighted.length).toBeGreaterThan(0);
        expect(highlighted.every((text) => text.toLowerCase() === word!.toLowerCase())).toBe(true);
        expect(await opened.isVisible()).toBe(true);
        await page.screenshot({path: app.artifact("search-opened.png")});

        // Words that are nowhere say so.
        await chat.byId("conversation-search").fill("zzqxv");
        await chat.byId("search-results").getByText("No message contains these words.").waitFor();
        await page.close();
    });

    it("keeps regenerated answers as versions, branches on an edited question, and switches between them", async () => {
        const {page, chat} = await open();
        await chat.newConversation();
        await chat.send("First question");
        await chat.waitForAnswerDone();
        await chat.send("Second question");
        await chat.waitForAnswerDone();
        const firstAnswer = (await chat.lastAssistant().getByTestId("answer-content").textContent())!;

        // Regenerate: a second version of the last answer, `< 2/2 >`, and the first one is one click away.
        await chat.lastAssistant().getByTestId("regenerate-button").click();
        await chat.waitForAnswerDone();
        expect(await chat.lastAssistant().getByTestId("version-count").textContent()).toBe("2/2");
        await chat.lastAssistant().getByTestId("previous-version").click();
        await expect.poll(() => chat.lastAssistant().getByTestId("version-count").textContent()).toBe("1/2");
        expect(await chat.lastAssistant().getByTestId("answer-content").textContent()).toBe(firstAnswer);

        // Edit the first question: a new branch from there, answered afresh.
        const first = chat.byId("message-user").first();
        await first.hover();
        await first.getByTestId("edit-message").click();
        await chat.byId("edit-input").fill("A better first question");
        await chat.byId("edit-input").press("Enter");
        await chat.waitForAnswerDone();
        expect(await chat.byId("message-user").count()).toBe(1);
        expect(await chat.byId("message-user").first().textContent()).toContain("A better first question");
        expect(await chat.byId("message-user").first().getByTestId("version-count").textContent()).toBe("2/2");
        await page.screenshot({path: app.artifact("branch-edited.png"), fullPage: true});

        // The original branch is whole: both questions, and the version of the answer last viewed there.
        await chat.byId("message-user").first().getByTestId("previous-version").click();
        await expect.poll(() => chat.byId("message-user").count()).toBe(2);
        expect(await chat.byId("message-user").nth(1).textContent()).toContain("Second question");
        expect(await chat.lastAssistant().getByTestId("version-count").textContent()).toBe("1/2");
        expect(await chat.lastAssistant().getByTestId("answer-content").textContent()).toBe(firstAnswer);

        // Stored: the same branch after a reload, and the next answer follows it.
        await page.reload();
        await chat.conversationItems().filter({hasText: "First question"}).first().click();
        await expect.poll(() => chat.byId("message-user").count()).toBe(2);
        await chat.send("Third question");
        await chat.waitForAnswerDone();
        expect(await chat.byId("message-user").allTextContents()).toEqual([
            expect.stringContaining("First question"),
            expect.stringContaining("Second question"),
            expect.stringContaining("Third question")
        ]);
        await page.screenshot({path: app.artifact("branch-versions.png"), fullPage: true});
        await page.close();
    });

    it("deletes a message with what follows it, and forks a conversation at a message", async () => {
        const {page, chat} = await open();
        await chat.newConversation();
        await chat.send("Zebra question");
        await chat.waitForAnswerDone();
        await chat.send("Yak question");
        await chat.waitForAnswerDone();
        const firstAnswer = (await chat.byId("message-assistant").first().getByTestId("answer-content").textContent())!;

        // Fork at the first answer: a new conversation with the path up to it, opened.
        await chat.byId("message-assistant").first().getByTestId("fork-message").click();
        await expect.poll(() => page.locator(".chat h1").textContent()).toBe("Zebra question (fork)");
        await expect.poll(() => chat.byId("message-user").count()).toBe(1);
        expect(await chat.lastAssistant().getByTestId("answer-content").textContent()).toBe(firstAnswer);
        await chat.send("Walrus question");
        await chat.waitForAnswerDone();
        expect(await chat.byId("message-user").allTextContents()).toEqual([
            expect.stringContaining("Zebra"),
            expect.stringContaining("Walrus")
        ]);
        await page.screenshot({path: app.artifact("forked.png"), fullPage: true});

        // Back in the original, nothing changed; delete the second question (asked to confirm): its answer goes too.
        await chat
            .conversationItems()
            .filter({has: page.getByTestId("conversation-title").getByText("Zebra question", {exact: true})})
            .first()
            .click();
        await expect.poll(() => chat.byId("message-user").count()).toBe(2);
        const second = chat.byId("message-user").nth(1);
        await second.hover();
        await second.getByTestId("delete-message").click();
        await second.getByTestId("confirm-delete-message").click();
        await expect.poll(() => chat.byId("message-user").count()).toBe(1);
        expect(await chat.byId("message-assistant").count()).toBe(1);
        await page.reload();
        await chat
            .conversationItems()
            .filter({has: page.getByTestId("conversation-title").getByText("Zebra question", {exact: true})})
            .first()
            .click();
        await chat.byId("message-user").first().waitFor();
        expect(await chat.byId("message-user").count()).toBe(1);
        expect(await chat.byId("message-assistant").count()).toBe(1);
        await page.screenshot({path: app.artifact("deleted.png"), fullPage: true});
        await page.close();
    });

    it("exports a conversation from its row and imports the file back as a new conversation", async () => {
        const {page, chat} = await open();
        await chat.newConversation();
        await chat.send("Quokka question");
        await chat.waitForAnswerDone();
        const answer = (await chat.lastAssistant().getByTestId("answer-content").textContent())!;

        const row = chat
            .conversationItems()
            .filter({has: page.getByTestId("conversation-title").getByText("Quokka question", {exact: true})})
            .first();
        await row.hover();
        const [download] = await Promise.all([page.waitForEvent("download"), row.getByTestId("export-conversation").click()]);
        const file = app.artifact("exported-conversation.json");
        await download.saveAs(file);
        expect(JSON.parse(fs.readFileSync(file, "utf8"))).toMatchObject({format: "ponder-conversation", version: 1});

        await chat.byId("import-file").setInputFiles(file);
        await expect.poll(() => chat.conversationItems().filter({hasText: "Quokka question"}).count()).toBe(2);
        await expect.poll(() => chat.byId("message-user").count()).toBe(1);
        expect(await chat.byId("message-user").first().textContent()).toContain("Quokka question");
        expect(await chat.lastAssistant().getByTestId("answer-content").textContent()).toBe(answer);
        await page.screenshot({path: app.artifact("imported.png"), fullPage: true});
        await page.close();
    });

    it("closes the thought at the thinking budget and answers", async () => {
        await app.start({model: await getFixtureModel("endless"), seed: 5});
        const {page, chat} = await open();
        await chat.newConversation();
        await setGeneration(chat, async () => {
            await chat.byId("thinking-budget").fill("24");
            await chat.byId("max-tokens").fill("200");
        });
        await chat.send("Think as long as you like");
        await chat.waitForAnswerDone();
        const assistant = chat.lastAssistant();
        const thought = Number(/(\d+) tokens/.exec((await assistant.getByTestId("thinking-stats").textContent())!)?.[1]);
        expect(thought).toBeGreaterThan(12);
        expect(thought).toBeLessThanOrEqual(24);
        expect((await assistant.getByTestId("answer-content").textContent())!.trim().length).toBeGreaterThan(0);
        expect(await assistant.getByTestId("message-cut").count()).toBe(0);
        await page.screenshot({path: app.artifact("thinking-budget.png"), fullPage: true});
        await page.close();
    });

    it("opens a search match deep in a long thought scrolled to the match", async () => {
        await app.start({model: await getFixtureModel("endless"), seed: 6});
        const {page, chat} = await open();
        await chat.newConversation();
        await setGeneration(chat, async () => {
            await chat.byId("thinking-budget").fill("");
            await chat.byId("max-tokens").fill("700");
        });
        await chat.send("Ramble on");
        await chat.waitForAnswerDone();
        const assistant = chat.lastAssistant();
        if (await assistant.getByTestId("thinking-content").isHidden()) await assistant.getByTestId("thinking-toggle").click();
        const thought = (await assistant.getByTestId("thinking-content").textContent())!;
        // A word first seen well past the box's first screen (the box holds about 14 lines), between spaces, so that the
        // rendered text and the stored thought split it the same way (markdown may join letters around `*` or a tag).
        const words = [...thought.matchAll(/(?<=\s)\p{L}{5,}(?=\s)/gu)]
            .filter((match) => match.index > thought.length * 0.6 && thought.toLowerCase().indexOf(match[0].toLowerCase()) === match.index)
            .map((match) => match[0]);
        expect(words.length).toBeGreaterThan(0);

        await chat.newConversation();
        // The first of them the search finds: a word the rendering shows between spaces may still sit inside a longer
        // word of the stored text (markdown drops characters), which a search for its start does not find.
        let word: string | null = null;
        for (const candidate of words.slice(0, 4)) {
            await chat.byId("conversation-search").fill(candidate);
            const found = await expect
                .poll(() => chat.byId("search-hit").count(), {timeout: 10_000})
                .toBeGreaterThan(0)
                .then(
                    () => true,
                    () => false
                );
            if (found) {
                word = candidate;
                break;
            }
        }
        expect(word, `a search for any of ${JSON.stringify(words.slice(0, 4))} of the thought ${JSON.stringify(thought)}`).not.toBeNull();
        // No title matches, but messages do: the list says where the matches are rather than that there are none.
        expect(await chat.byId("conversations-empty").textContent()).toMatch(/matches in messages are below/);
        await chat.byId("search-hit").first().click();
        await page.locator("[data-message-id][data-found] [data-testid=thinking-content]").waitFor({state: "visible"});
        const placement = await page.evaluate(() => {
            const first = [...CSS.highlights.get("search-match")!][0] as Range;
            const rect = first.getBoundingClientRect();
            const content = document.querySelector<HTMLElement>("[data-found] [data-testid=thinking-content]")!;
            const box = content.getBoundingClientRect();
            return {
                overflows: content.scrollHeight > content.clientHeight + 20,
                inBox: rect.top >= box.top - 1 && rect.bottom <= box.bottom + 1,
                inWindow: rect.top >= 0 && rect.bottom <= window.innerHeight
            };
        });
        expect(placement).toEqual({overflows: true, inBox: true, inWindow: true});
        await page.screenshot({path: app.artifact("search-long-thought.png")});
        await page.close();
    });
});
