import type {Locator, Page} from "playwright-core";

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
    }

    conversationItems(): Locator {
        return this.byId("conversation-item");
    }
}
