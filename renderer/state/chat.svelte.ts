import type {Events, MessageDto, PonderApi} from "../../preload/contract.js";
import {describeError} from "../lib/describeError.js";
import {tokensPerSecond} from "../lib/format.js";
import {request} from "./request.js";
import {succeeded} from "./succeeded.js";

export type Chat = ReturnType<typeof createChat>;
type Delta = Events["chat:delta"];

/** Live bookkeeping of a streaming message, beside its DTO. */
type LiveInfo = {
    /** Local clock (`now()`) at the latest delta: the UI extrapolates elapsed time from it between tokens. */
    lastDeltaAt: number;
};

export type ChatOptions = {
    /** Monotonic clock in ms. Defaults to `performance.now`. */
    now?: () => number;
};

/** The open conversation's messages, kept current by small `chat:delta` events; send, stop, regenerate. */
export function createChat(bridge: PonderApi, options: ChatOptions = {}) {
    const now = options.now ?? (() => performance.now());
    const state = $state({
        conversationId: null as string | null,
        messages: [] as MessageDto[],
        live: {} as Record<string, LiveInfo>,
        /** A send or regenerate request is on its way. */
        sending: false,
        error: null as string | null
    });
    // Events that raced ahead of the response announcing their message (plain maps: not displayed).
    /* eslint-disable svelte/prefer-svelte-reactivity */
    const earlyDeltas = new Map<string, Delta[]>();
    const earlyDone = new Map<string, MessageDto>();
    /* eslint-enable svelte/prefer-svelte-reactivity */

    const generating = $derived(state.sending || state.messages.some((message) => message.status === "streaming"));
    const lastMessage = $derived(state.messages.at(-1) ?? null);
    const lastAssistant = $derived(state.messages.findLast((message) => message.role === "assistant") ?? null);
    const rate = $derived(lastAssistant ? tokensPerSecond(lastAssistant) : null);

    function find(id: string): MessageDto | undefined {
        return state.messages.find((message) => message.id === id);
    }

    function applyDelta(delta: Delta): void {
        if (delta.conversationId !== state.conversationId) return;
        const message = find(delta.messageId);
        if (!message) {
            earlyDeltas.set(delta.messageId, [...(earlyDeltas.get(delta.messageId) ?? []), delta]);
            return;
        }
        if (delta.segment === "thought") {
            message.thinking += delta.text;
            // As the backend counts it: from the request to the latest thought.
            message.thinkingMs = delta.elapsedMs;
        } else message.text += delta.text;
        message.thinkingTokens = delta.thinkingTokens;
        message.answerTokens = delta.answerTokens;
        message.totalMs = delta.elapsedMs;
        message.status = "streaming";
        state.live[message.id] = {lastDeltaAt: now()};
    }

    function applyDone({conversationId, message}: Events["chat:done"]): void {
        if (conversationId !== state.conversationId) return;
        const index = state.messages.findIndex((existing) => existing.id === message.id);
        if (index < 0) {
            earlyDone.set(message.id, message);
            return;
        }
        state.messages[index] = message;
        delete state.live[message.id];
        earlyDeltas.delete(message.id);
    }

    function addAssistant(message: MessageDto): void {
        const done = earlyDone.get(message.id);
        earlyDone.delete(message.id);
        const deltas = earlyDeltas.get(message.id) ?? [];
        earlyDeltas.delete(message.id);
        if (done) {
            state.messages.push(done);
            return;
        }
        state.messages.push(message);
        if (message.status === "streaming") state.live[message.id] = {lastDeltaAt: now()};
        for (const delta of deltas) applyDelta(delta);
    }

    /** Shows a conversation (or none). Messages still streaming there keep streaming. */
    function open(conversationId: string | null, messages: MessageDto[]): void {
        earlyDeltas.clear();
        earlyDone.clear();
        state.conversationId = conversationId;
        state.messages = [...messages];
        state.live = {};
        for (const message of state.messages) if (message.status === "streaming") state.live[message.id] = {lastDeltaAt: now()};
        state.error = null;
    }

    async function send(text: string): Promise<boolean> {
        const conversationId = state.conversationId;
        const trimmed = text.trim();
        if (conversationId == null || trimmed === "" || generating) return false;
        state.sending = true;
        state.error = null;
        const result = await request(bridge, "chat:send", {conversationId, text: trimmed});
        state.sending = false;
        if (state.conversationId !== conversationId) return result.ok;
        if (!succeeded(result, state, "Could not send the message")) return false;
        state.messages.push(result.value.userMessage);
        addAssistant(result.value.assistantMessage);
        return true;
    }

    /**
     * Another version of the last answer; with `compareFull`, the same answer again under Full KV with its seed, which
     * then shows how the two compare.
     */
    async function regenerate(options: {compareFull?: boolean} = {}): Promise<boolean> {
        const conversationId = state.conversationId;
        if (conversationId == null || generating || lastMessage?.role !== "assistant") return false;
        state.sending = true;
        state.error = null;
        const result = await request(bridge, "chat:regenerate", {
            conversationId,
            ...(options.compareFull === true ? {compareFull: true} : {})
        });
        state.sending = false;
        if (state.conversationId !== conversationId) return result.ok;
        if (!result.ok) {
            state.error = describeError(
                options.compareFull === true ? "Could not compare with Full KV" : "Could not regenerate the answer",
                result.error
            );
            return false;
        }
        // The new answer replaces the last one.
        if (state.messages.at(-1)?.role === "assistant") state.messages.pop();
        addAssistant(result.value.assistantMessage);
        return true;
    }

    /** Sends a new version of one of the user's messages: the conversation shows the new branch from there. */
    async function editMessage(messageId: string, text: string): Promise<boolean> {
        const conversationId = state.conversationId;
        const trimmed = text.trim();
        const index = state.messages.findIndex((message) => message.id === messageId);
        if (conversationId == null || trimmed === "" || generating || index < 0) return false;
        state.sending = true;
        state.error = null;
        const result = await request(bridge, "chat:edit", {conversationId, messageId, text: trimmed});
        state.sending = false;
        if (state.conversationId !== conversationId) return result.ok;
        if (!succeeded(result, state, "Could not send the edited message")) return false;
        state.messages.splice(index);
        state.messages.push(result.value.userMessage);
        addAssistant(result.value.assistantMessage);
        return true;
    }

    /** Shows another version of a message (and the messages last viewed after it). */
    function showVersion(messageId: string): Promise<boolean> {
        return changePath("conversations:switchBranch", messageId, "Could not show that version");
    }

    /** Deletes a message and everything after it; the conversation shows what remains. */
    function deleteMessage(messageId: string): Promise<boolean> {
        return changePath("conversations:deleteMessage", messageId, "Could not delete the message");
    }

    /** Asks for a change to the path shown at `messageId`, then shows the path the backend returns. */
    async function changePath(
        channel: "conversations:switchBranch" | "conversations:deleteMessage",
        messageId: string,
        failure: string
    ): Promise<boolean> {
        const conversationId = state.conversationId;
        if (conversationId == null || generating) return false;
        const result = await request(bridge, channel, {id: conversationId, messageId});
        if (state.conversationId !== conversationId) return result.ok;
        if (!result.ok) {
            state.error = describeError(failure, result.error);
            return false;
        }
        open(conversationId, result.value.messages);
        return true;
    }

    /** Resumes the last answer where it was cut off, stopped or interrupted; it grows in place. */
    async function continueAnswer(): Promise<boolean> {
        const conversationId = state.conversationId;
        const message = lastMessage;
        if (conversationId == null || !canContinue(message)) return false;
        const before = {status: message.status, cut: message.cut, error: message.error};
        // Streaming from now on: deltas may arrive before the response and append to it.
        Object.assign(message, {status: "streaming", cut: null, error: null});
        state.live[message.id] = {lastDeltaAt: now()};
        state.error = null;
        const result = await request(bridge, "chat:continue", {conversationId});
        if (result.ok || state.conversationId !== conversationId) return result.ok;
        Object.assign(message, before);
        delete state.live[message.id];
        state.error = describeError("Could not continue the answer", result.error);
        return false;
    }

    function canContinue(message: MessageDto | null): message is MessageDto {
        return (
            !generating &&
            message?.role === "assistant" &&
            message.status !== "complete" &&
            message.status !== "streaming" &&
            !(message.status === "error" && message.text === "" && message.thinking === "")
        );
    }

    async function stop(): Promise<void> {
        const conversationId = state.conversationId;
        if (conversationId == null) return;
        const result = await request(bridge, "chat:stop", {conversationId});
        if (!result.ok) state.error = describeError("Could not stop the generation", result.error);
    }

    const offDelta = bridge.on("chat:delta", applyDelta);
    const offDone = bridge.on("chat:done", applyDone);

    return {
        state,
        /** Whether an answer is being generated in the open conversation (or a request for one is on its way). */
        get generating() {
            return generating;
        },
        get lastAssistant() {
            return lastAssistant;
        },
        /** Tokens/s of the latest answer, live while it streams. */
        get rate() {
            return rate;
        },
        /** Whether the last message is an answer that may be generated again. */
        get canRegenerate() {
            return !generating && lastMessage?.role === "assistant";
        },
        /** Whether the last message is an answer that ended early (cut off, stopped, interrupted) and may be continued. */
        get canContinue() {
            return canContinue(lastMessage);
        },
        /** The clock live figures are measured with. */
        now,
        open,
        send,
        regenerate,
        continueAnswer,
        editMessage,
        showVersion,
        deleteMessage,
        stop,
        dispose(): void {
            offDelta();
            offDone();
        }
    };
}
