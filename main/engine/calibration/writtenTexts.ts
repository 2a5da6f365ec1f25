// Texts already written, for a calibration that reads instead of writing: a person's stored conversations with the
// model, or a trace file (JSON Lines of prompts and responses, or of chat messages, with the thought in
// `reasoning_content` or inside `<think>...</think>`). A text is rendered with the model's chat template as the engine
// renders a conversation, so that reading it gives the attention, and so the read horizons and gate inputs, that
// writing it gave.
import type {ChatHistoryItem, ChatModelResponse, ChatWrapper, LlamaModel, Token} from "node-llama-cpp";

/** One exchange of a written text: the person's message and the model's thought and answer. */
export type WrittenTurn = {user: string; thought: string; answer: string};

/** A conversation already written: an optional system prompt and its exchanges, in order. */
export type WrittenText = {
    /** System prompt; none when empty. Defaults to `""`. */
    system?: string;
    turns: WrittenTurn[];
};

/** A written text as tokens: `tokens` rendered by the chat template; the first `promptTokens` are its first question. */
export type RenderedText = {tokens: Token[]; promptTokens: number; cut: boolean};

/** Most texts a trace file may hold, and most characters per text. */
export const traceFileLimits = {texts: 10_000, characters: 262_144};

/**
 * Renders `text` with the model's chat template (each answer's thought as the template's thought segment), cut to
 * `maxTokens` tokens (`cut` says so). Its first question, rendered as an answer opens (thought prefix included), is the
 * prompt part: the tokens from `promptTokens` on are the model's.
 */
export function renderWrittenText(model: LlamaModel, chatWrapper: ChatWrapper, text: WrittenText, maxTokens: number): RenderedText {
    const history: ChatHistoryItem[] = [];
    if ((text.system ?? "") !== "") history.push({type: "system", text: text.system!});
    const thinks = chatWrapper.settings.segments?.thought != null;
    const render = (items: ChatHistoryItem[]) =>
        chatWrapper.generateContextState({chatHistory: items}).contextText.tokenize(model.tokenizer);
    const opening: ChatModelResponse["response"] = thinks ? [{type: "segment", segmentType: "thought", text: "", ended: false}] : [];
    const first = text.turns[0];
    if (first == null) throw new Error("a written text has no exchange");
    const promptTokens = render([...history, {type: "user", text: first.user}, {type: "model", response: opening}]).length;
    for (const turn of text.turns) {
        const response: ChatModelResponse["response"] = [];
        if (thinks && turn.thought !== "") response.push({type: "segment", segmentType: "thought", text: turn.thought, ended: true});
        else if (turn.thought !== "") response.push(`<think>\n${turn.thought}\n</think>\n\n`);
        response.push(turn.answer);
        history.push({type: "user", text: turn.user}, {type: "model", response});
    }
    const tokens = render(history);
    const cut = tokens.length > maxTokens;
    return {tokens: cut ? tokens.slice(0, maxTokens) : tokens, promptTokens: Math.min(promptTokens, maxTokens), cut};
}

/** The written texts of a trace file's JSON Lines, in order; a malformed line is refused with its number. */
export function parseTraceFile(content: string): WrittenText[] {
    const texts: WrittenText[] = [];
    for (const [index, line] of content
        .replace(/^\uFEFF/, "")
        .split(/\r?\n/)
        .entries()) {
        if (line.trim() === "") continue;
        const number = index + 1;
        let value: unknown;
        try {
            value = JSON.parse(line);
        } catch {
            throw new Error(`line ${number}: not JSON (a trace file has one JSON object per line)`);
        }
        if (typeof value !== "object" || value == null || Array.isArray(value))
            throw new Error(`line ${number}: not an object with "prompt" and "response", or "messages"`);
        if (line.length > traceFileLimits.characters)
            throw new Error(`line ${number}: ${line.length} characters, more than ${traceFileLimits.characters}`);
        texts.push(traceText(value as Record<string, unknown>, number));
        if (texts.length > traceFileLimits.texts) throw new Error(`more than ${traceFileLimits.texts} texts`);
    }
    if (texts.length === 0) throw new Error("no texts in the file");
    return texts;
}

function traceText(object: Record<string, unknown>, number: number): WrittenText {
    if (typeof object.prompt === "string" && typeof object.response === "string") {
        const system = typeof object.system === "string" ? object.system : "";
        return {system, turns: [{user: object.prompt, ...splitThought(object.response, stringOr(object.reasoning_content))}]};
    }
    if (!Array.isArray(object.messages)) throw new Error(`line ${number}: neither "prompt" and "response" strings nor a "messages" list`);
    let system = "";
    const turns: WrittenTurn[] = [];
    let user: string | null = null;
    for (const [m, message] of (object.messages as unknown[]).entries()) {
        const entry = message as {role?: unknown; content?: unknown; reasoning_content?: unknown} | null;
        if (typeof entry !== "object" || entry == null || typeof entry.role !== "string")
            throw new Error(`line ${number}: message ${m + 1} has no role`);
        const content = messageContent(entry.content);
        if (content == null) throw new Error(`line ${number}: message ${m + 1} has no text content`);
        if (entry.role === "system" || entry.role === "developer") {
            if (turns.length > 0 || user != null) throw new Error(`line ${number}: a system message after the conversation began`);
            system = content;
        } else if (entry.role === "user") {
            if (user != null) throw new Error(`line ${number}: two user messages in a row (message ${m + 1})`);
            user = content;
        } else if (entry.role === "assistant") {
            if (user == null) throw new Error(`line ${number}: an assistant message without a user message before it (message ${m + 1})`);
            turns.push({user, ...splitThought(content, stringOr(entry.reasoning_content))});
            user = null;
        } else throw new Error(`line ${number}: message ${m + 1} has the role ${JSON.stringify(entry.role)} (system, user or assistant)`);
    }
    if (turns.length === 0) throw new Error(`line ${number}: no assistant message answers a user message`);
    return {system, turns};
}

/** A message's text: a string, or the text parts of a content list (OpenAI's format). */
function messageContent(content: unknown): string | null {
    if (typeof content === "string") return content;
    if (!Array.isArray(content)) return null;
    const parts = content.map((part) => (part as {type?: unknown; text?: unknown} | null)?.text);
    return parts.every((part) => typeof part === "string") ? parts.join("") : null;
}

function stringOr(value: unknown): string | null {
    return typeof value === "string" ? value : null;
}

/** An answer's thought and the rest: the separate reasoning when given, else a leading `<think>...</think>` block. */
export function splitThought(response: string, reasoning: string | null): {thought: string; answer: string} {
    if (reasoning != null) return {thought: reasoning.trim(), answer: response.trim()};
    const match = /^\s*<think>([\s\S]*?)<\/think>/.exec(response);
    if (match == null) return {thought: "", answer: response.trim()};
    return {thought: match[1]!.trim(), answer: response.slice(match[0].length).trim()};
}
