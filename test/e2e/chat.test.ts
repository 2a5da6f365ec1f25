import type {Page} from "playwright-core";
import {describe, expect, it} from "vitest";
import {getFixtureModel} from "../fixtures/gguf/fixtures.js";
import {useApp} from "./appFixture.js";
import type {ChatPage} from "./ChatPage.js";

describe("chat in Chromium against the real backend", () => {
    const app = useApp("chat");

    async function open(): Promise<{page: Page; chat: ChatPage}> {
        const {page, chat, errors} = await app.open({consoleErrors: true});
        expect(errors).toEqual([]);
        return {page, chat};
    }

    it("creates a conversation, streams thinking then the answer, and finds it again after a reload", async () => {
        await app.start({model: await getFixtureModel("tiny-qwen2"), seed: 3});
        const {page, chat} = await open();
        await chat.byId("engine-state").filter({hasText: /ready/i}).waitFor();
        await chat.newConversation();
        await chat.send("What is the sum of the first ten primes?");

        // The thinking block appears while the model thinks, with a live token count.
        await chat.byId("thinking-block").first().waitFor();
        await chat.waitForAnswerDone();
        const assistant = chat.lastAssistant();
        const thinking = await assistant
            .getByTestId("thinking-content")
            .textContent({timeout: 5_000})
            .catch(() => null);
        if (thinking == null) {
            await assistant.getByTestId("thinking-toggle").click();
        }
        expect((await assistant.getByTestId("thinking-content").textContent())!.trim().length).toBeGreaterThan(0);
        expect((await assistant.getByTestId("answer-content").textContent())!.trim().length).toBeGreaterThan(0);
        expect(await assistant.getByTestId("thinking-stats").textContent()).toMatch(/\d+ tokens/);
        expect(await assistant.getByTestId("message-stats").textContent()).toMatch(/tok\/s/);
        await page.screenshot({path: app.artifact("chat.png"), fullPage: true});

        const title = await chat.byId("conversation-title").first().textContent();
        expect(title).toContain("What is the sum");

        await page.reload();
        await chat.conversationItems().first().waitFor();
        await chat.conversationItems().first().click();
        await chat.byId("message-user").first().waitFor();
        expect(await chat.byId("message-user").first().textContent()).toContain("What is the sum of the first ten primes?");
        expect((await chat.lastAssistant().getByTestId("answer-content").textContent())!.trim().length).toBeGreaterThan(0);
        await page.close();
    });

    /** A backend with the model that never stops thinking, and a question it has thought about for 40 tokens. */
    async function thinkAtLength(question: string) {
        await app.backend.stop();
        const endless = await getFixtureModel("endless");
        await app.start({model: endless, seed: 5});
        const opened = await open();
        await opened.chat.byId("engine-state").filter({hasText: /ready/i}).waitFor();
        await opened.chat.newConversation();
        await opened.chat.send(question);
        await opened.page.waitForFunction(
            () => {
                const stats = document.querySelector("[data-testid=thinking-stats]")?.textContent ?? "";
                return Number(/(\d+) tokens/.exec(stats)?.[1] ?? 0) >= 40;
            },
            undefined,
            {timeout: 60_000}
        );
        return opened;
    }

    it("stays up when the engine process is killed mid-answer: the answer is kept and marked, the engine restarts, the next answer works", async () => {
        const {page, chat} = await thinkAtLength("Think until the engine dies");
        const enginePid = app.backend.enginePid();
        process.kill(enginePid, "SIGKILL");

        // The page stays connected: the answer ends interrupted with what it had, and says why.
        const assistant = chat.lastAssistant();
        await assistant
            .getByTestId("message-status")
            .filter({hasText: /interrupted/i})
            .waitFor({timeout: 30_000});
        expect(await assistant.textContent()).toMatch(/engine process was killed \(SIGKILL/);
        await chat
            .byId("engine-message")
            .filter({hasText: /restarted in \d+\.\d s with endless/})
            .waitFor({timeout: 120_000});
        await chat.byId("engine-state").filter({hasText: /ready/i}).waitFor();
        expect(app.backend.enginePid()).not.toBe(enginePid);
        await page.screenshot({path: app.artifact("engine-restarted.png"), fullPage: true});

        // Continue resumes the kept answer in the new engine.
        const before = Number(/(\d+) tokens/.exec((await assistant.getByTestId("thinking-stats").textContent()) ?? "")?.[1] ?? 0);
        await assistant.getByTestId("continue-button").click();
        await page.waitForFunction(
            (floor) => {
                const stats = [...document.querySelectorAll("[data-testid=thinking-stats]")].at(-1)?.textContent ?? "";
                return Number(/(\d+) tokens/.exec(stats)?.[1] ?? 0) >= floor + 20;
            },
            before,
            {timeout: 60_000}
        );
        await chat.byId("stop-button").click();
        await assistant
            .getByTestId("message-status")
            .filter({hasText: /stopped/i})
            .waitFor({timeout: 30_000});
        await page.close();
    });

    it("keeps the partial answer, marked interrupted, when the backend is killed mid-answer", async () => {
        const {page} = await thinkAtLength("Think for a long time");
        // Let the periodic save catch up with what is on screen, then pull the plug.
        await page.waitForTimeout(600);
        await app.backend.kill();
        await page.close();

        await app.start();
        const reopened = await open();
        await reopened.chat.conversationItems().filter({hasText: "Think for a long time"}).first().click();
        const assistant = reopened.chat.lastAssistant();
        await assistant.waitFor();
        expect(await assistant.getByTestId("message-status").textContent()).toMatch(/interrupted/i);
        const toggle = assistant.getByTestId("thinking-toggle");
        if ((await assistant.getByTestId("thinking-content").count()) === 0) await toggle.click();
        expect((await assistant.getByTestId("thinking-content").textContent())!.trim().length).toBeGreaterThan(20);
        await reopened.page.screenshot({path: app.artifact("interrupted.png"), fullPage: true});
        await reopened.page.close();
    });
});
