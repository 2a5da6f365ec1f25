import type {AppDatabase} from "../db/AppDatabase.js";
import type {WrittenText} from "../engine/calibration/writtenTexts.js";

/** A model's stored conversations as texts to read, and how much there is. */
export type ConversationTexts = {
    texts: WrittenText[];
    /** Conversations with at least one exchange of the model's. */
    conversations: number;
    /** Question-and-answer pairs in them. */
    exchanges: number;
    /** Tokens the model wrote in them (thoughts and answers), and the questions' at about 4 characters a token. */
    tokens: number;
};

/** The fewest conversations a calibration reads: some to fit the gates on, one held out to validate them. */
export const minimumConversations = 4;

/**
 * The conversations the model at `modelPath` wrote, newest first, as the path each shows: from its first exchange on,
 * every question with the model's finished answer, up to the first answer another model wrote (or one that did not
 * finish), since what follows it was written after another model's text. At most `limit` conversations.
 */
export function conversationTexts(db: AppDatabase, modelPath: string, limit = 500): ConversationTexts {
    const texts: WrittenText[] = [];
    let exchanges = 0;
    let tokens = 0;
    for (const conversation of db.conversations.list()) {
        if (texts.length >= limit) break;
        const path = db.messages.listByConversation(conversation.id);
        const turns: WrittenText["turns"] = [];
        for (let i = 0; i + 1 < path.length; i += 2) {
            const [question, answer] = [path[i]!, path[i + 1]!];
            if (question.role !== "user" || answer.role !== "assistant") break;
            if (answer.model_path !== modelPath || answer.status !== "complete") break;
            turns.push({user: question.text, thought: answer.thinking, answer: answer.text});
            tokens += answer.thinking_tokens + answer.answer_tokens + Math.ceil(question.text.length / 4);
        }
        if (turns.length === 0) continue;
        const system = settingsSystemPrompt(conversation.settings);
        texts.push({system, turns});
        exchanges += turns.length;
    }
    return {texts, conversations: texts.length, exchanges, tokens};
}

/** A conversation's system prompt from its stored settings (JSON); `""` when it has none. */
function settingsSystemPrompt(settings: string): string {
    try {
        const prompt = (JSON.parse(settings) as {systemPrompt?: unknown} | null)?.systemPrompt;
        return typeof prompt === "string" ? prompt : "";
    } catch {
        return "";
    }
}
