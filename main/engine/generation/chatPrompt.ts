import type {ChatHistoryItem, ChatModelResponse, ChatWrapper, Token} from "node-llama-cpp";
import {AppError} from "../../AppError.js";
import type {LoadedModel} from "../runtime/engineState.js";
import type {ChatTurn, CountTokensRequest, PromptTokenCount} from "../EngineApi.js";

// The chat prompt: a stored conversation rendered by the model's chat wrapper, as node-llama-cpp history and in tokens.

/** Tokens at the end of a prompt left for node-llama-cpp to evaluate itself (the assistant's opening, where its rendering may differ). */
export const promptTail = 16;

/**
 * The chat an answer is generated in: the earlier turns (`history`), and with the last turn (`full`) a new user message
 * and an empty answer, or the unfinished answer. Thinking off: the answer opens with an empty, closed thought, where the
 * template has thought segments. `openingKind` keys the opening the wrapper adds beyond the rendering (`openingTokens`).
 */
export function answerPrompt(chatWrapper: ChatWrapper, systemPrompt: string, turns: ChatTurn[], thinking: boolean) {
    const last = turns.at(-1)!;
    const history = toChatHistory(systemPrompt, turns.slice(0, -1));
    const skipThought = last.role === "user" && !thinking && chatWrapper.settings.segments?.thought != null;
    const opening: ChatModelResponse["response"] = skipThought ? [{type: "segment", segmentType: "thought", text: "", ended: true}] : [];
    const full: ChatHistoryItem[] =
        last.role === "user"
            ? [...history, {type: "user", text: last.text}, {type: "model", response: opening}]
            : [...history, {type: "model", response: partialResponse(last)}];
    return {history, full, skipThought, openingKind: `${last.role}:${skipThought ? "no-thought" : "thought"}`};
}

/** A chat rendered by the model's chat wrapper, in tokens. */
export function tokenizeChat(loaded: LoadedModel, chat: ChatHistoryItem[]): Token[] {
    return loaded.chatWrapper.generateContextState({chatHistory: chat}).contextText.tokenize(loaded.model.tokenizer);
}

/**
 * Counts the prompt an answer to `request.history` (ending with a new user message) would read, rendered and tokenized
 * as a generation renders it, with the opening as last measured: the figure Full KV's refusal names. The message's
 * share is its rendered turn: what its text adds to the same prompt with an empty message, and the empty turn's own
 * tokens (its markers and the assistant's opening); at least the text's own tokens. Not the prompt less the earlier
 * turns rendered alone: a template may render those otherwise once a message follows (an earlier thought dropped).
 */
export function countPromptTokens(loaded: LoadedModel, request: CountTokensRequest): PromptTokenCount {
    const last = request.history.at(-1);
    if (last == null || last.role !== "user")
        throw new AppError("BAD_REQUEST", "A count needs a conversation that ends with a user message");
    const thinking = request.thinking !== false;
    const rendered = (systemPrompt: string, turns: ChatTurn[]) =>
        tokenizeChat(loaded, answerPrompt(loaded.chatWrapper, systemPrompt, turns, thinking).full).length;
    const {openingKind} = answerPrompt(loaded.chatWrapper, request.systemPrompt, request.history, thinking);
    const withText = rendered(request.systemPrompt, request.history);
    const withoutText = rendered(request.systemPrompt, [...request.history.slice(0, -1), {role: "user", text: ""}]);
    const emptyTurn = rendered("", [{role: "user", text: ""}]) - tokenizeChat(loaded, []).length;
    const ownTokens = loaded.model.tokenize(last.text, false).length;
    return {
        promptTokens: withText + (loaded.openingTokens.get(openingKind) ?? 0),
        messageTokens: Math.max(ownTokens, withText - withoutText + emptyTurn)
    };
}

/**
 * The tokens of a prompt that a later request of the same conversation keeps: its rendering up to where it reads otherwise
 * once the answer is history (the assistant's opening, a thought a template drops), found by rendering the chat with the
 * answer's turn closed by an empty user message.
 */
export function continuedPrefix(loaded: LoadedModel, rendered: readonly Token[], chat: ChatHistoryItem[]): number {
    try {
        return commonPrefixLength(rendered, tokenizeChat(loaded, [...chat, {type: "user", text: ""}]));
    } catch {
        return Math.max(0, rendered.length - promptTail);
    }
}

/** How many leading tokens `a` and `b` share. */
export function commonPrefixLength(a: readonly number[], b: readonly number[]): number {
    let n = 0;
    while (n < a.length && n < b.length && a[n] === b[n]) n++;
    return n;
}

/** The stored conversation as node-llama-cpp chat history; past thinking goes back as a closed thought segment. */
export function toChatHistory(systemPrompt: string, turns: ChatTurn[]): ChatHistoryItem[] {
    const history: ChatHistoryItem[] = [];
    if (systemPrompt.trim() !== "") history.push({type: "system", text: systemPrompt});

    for (const turn of turns) {
        if (turn.role === "user") {
            history.push({type: "user", text: turn.text});
            continue;
        }
        const response: ChatModelResponse["response"] = [];
        if (turn.thinking !== "") response.push({type: "segment", segmentType: "thought", text: turn.thinking, ended: true});
        if (turn.text !== "") response.push(turn.text);
        history.push({type: "model", response});
    }
    return history;
}

/** An unfinished answer as a model response: its thought is still open when no answer text followed it. */
function partialResponse(turn: Extract<ChatTurn, {role: "assistant"}>): ChatModelResponse["response"] {
    const response: ChatModelResponse["response"] = [];
    if (turn.thinking !== "") response.push({type: "segment", segmentType: "thought", text: turn.thinking, ended: turn.text !== ""});
    if (turn.text !== "") response.push(turn.text);
    return response;
}
