import type {Browser, Locator, Page} from "playwright-core";

/** What a person sees and does in the chat window, by test id. */
export class ChatPage {
    constructor(readonly page: Page) {}

    byId(id: string): Locator {
        return this.page.getByTestId(id);
    }

    async newConversation(): Promise<void> {
        await this.byId("new-conversation").click();
    }

    async send(text: string): Promise<void> {
        await this.byId("composer-input").fill(text);
        await this.byId("composer-input").press("Enter");
    }

    lastAssistant(): Locator {
        return this.byId("message-assistant").last();
    }

    async waitForAnswerDone(timeout = 120_000): Promise<void> {
        await this.byId("stop-button").waitFor({state: "detached", timeout});
        // The answer's last save is made before its end reaches the page; no answer is still marked busy.
        await this.page.locator("[data-testid=message-assistant][aria-busy=true]").first().waitFor({state: "detached", timeout});
    }

    conversationItems(): Locator {
        return this.byId("conversation-item");
    }
}

/**
 * A new page on the app at `url`, shown once its status bar is: with the page's errors (uncaught exceptions, and with
 * `consoleErrors` console errors too) collected for the test to check.
 */
export async function openApp(
    browser: Browser,
    url: string,
    options: {viewport?: {width: number; height: number}; consoleErrors?: boolean} = {}
) {
    const page = await browser.newPage({viewport: options.viewport ?? {width: 1280, height: 860}});
    const errors: string[] = [];
    page.on("pageerror", (err) => errors.push(err.message));
    if (options.consoleErrors === true) {
        page.on("console", (message) => {
            if (message.type() === "error") errors.push(message.text());
        });
    }
    await page.goto(url);
    await page.getByTestId("status-bar").waitFor();
    return {page, chat: new ChatPage(page), errors};
}
