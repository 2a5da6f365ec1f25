import {describe, expect, test} from "vitest";
import {createChat} from "../../../renderer/state/chat.svelte.js";
import {conversationSettings, createFakeBridge, message} from "./fakeBridge.js";

function setup() {
    const bridge = createFakeBridge();
    let clock = 1000;
    const chat = createChat(bridge.api, {now: () => clock});
    chat.open("c1", [message({id: "u0", role: "user", text: "Earlier"}), message({id: "a0", role: "assistant", text: "Earlier answer"})]);
    const advance = (ms: number) => (clock += ms);
    return {bridge, chat, advance};
}

function replyToSend(bridge: ReturnType<typeof createFakeBridge>) {
    bridge.handle("chat:send", ({text}) => ({
        ok: true,
        value: {
            userMessage: message({id: "u1", role: "user", text}),
            assistantMessage: message({id: "a1", role: "assistant", status: "streaming"})
        }
    }));
}

const delta = (segment: "thought" | "answer", text: string, thinkingTokens: number, answerTokens: number, elapsedMs: number) => ({
    conversationId: "c1",
    messageId: "a1",
    segment,
    text,
    thinkingTokens,
    answerTokens,
    elapsedMs
});

describe("chat state", () => {
    test("sending adds both messages and marks the chat as generating", async () => {
        const {bridge, chat} = setup();
        replyToSend(bridge);
        expect(await chat.send("  Why is the sky blue?  ")).toBe(true);
        expect(bridge.calls.at(-1)).toEqual({channel: "chat:send", payload: {conversationId: "c1", text: "Why is the sky blue?"}});
        expect(chat.state.messages.map((m) => m.id)).toEqual(["u0", "a0", "u1", "a1"]);
        expect(chat.generating).toBe(true);
        expect(chat.canRegenerate).toBe(false);
    });

    test("deltas append only their text, thoughts and answer apart, with live counts and times", async () => {
        const {bridge, chat, advance} = setup();
        replyToSend(bridge);
        await chat.send("Question");
        bridge.emit("chat:delta", delta("thought", "Let me ", 2, 0, 300));
        advance(50);
        bridge.emit("chat:delta", delta("thought", "think.", 3, 0, 1300));
        const live = chat.state.messages.at(-1)!;
        expect(live.thinking).toBe("Let me think.");
        expect(live.text).toBe("");
        expect(live.thinkingTokens).toBe(3);
        expect(live.thinkingMs).toBe(1300);
        expect(chat.state.live.a1?.lastDeltaAt).toBe(1050);

        bridge.emit("chat:delta", delta("answer", "Blue ", 3, 1, 1500));
        bridge.emit("chat:delta", delta("answer", "light.", 3, 2, 2000));
        expect(live.text).toBe("Blue light.");
        expect(live.thinking).toBe("Let me think.");
        expect(live.thinkingMs).toBe(1300);
        expect(live.totalMs).toBe(2000);
        // 5 tokens in 2 s.
        expect(chat.rate).toBeCloseTo(2.5);
        // Nothing was fetched per token.
        expect(bridge.calls.map((call) => call.channel)).toEqual(["chat:send"]);
    });

    test("done replaces the streaming message and ends the generation", async () => {
        const {bridge, chat} = setup();
        replyToSend(bridge);
        await chat.send("Question");
        bridge.emit("chat:delta", delta("answer", "Partial", 0, 1, 100));
        const final = message({
            id: "a1",
            role: "assistant",
            text: "Final answer",
            thinking: "Thought",
            status: "complete",
            answerTokens: 2,
            totalMs: 400
        });
        bridge.emit("chat:done", {conversationId: "c1", message: final});
        expect(chat.state.messages.at(-1)).toEqual(final);
        expect(chat.generating).toBe(false);
        expect(chat.canRegenerate).toBe(true);
        expect(chat.state.live.a1).toBeUndefined();
    });

    test("events of other conversations are ignored", async () => {
        const {bridge, chat} = setup();
        replyToSend(bridge);
        await chat.send("Question");
        bridge.emit("chat:delta", {...delta("answer", "Elsewhere", 0, 1, 10), conversationId: "c2"});
        expect(chat.state.messages.at(-1)?.text).toBe("");
    });

    test("deltas and done that arrive before the send response are not lost", async () => {
        const {bridge, chat} = setup();
        bridge.handle("chat:send", ({text}) => {
            bridge.emit("chat:delta", delta("answer", "Early", 0, 1, 10));
            const userMessage = message({id: "u1", role: "user", text});
            return {ok: true, value: {userMessage, assistantMessage: message({id: "a1", role: "assistant", status: "streaming"})}};
        });
        await chat.send("Question");
        expect(chat.state.messages.at(-1)?.text).toBe("Early");

        bridge.handle("chat:regenerate", () => {
            const done = message({id: "a2", role: "assistant", text: "Fast", status: "complete"});
            bridge.emit("chat:done", {conversationId: "c1", message: done});
            return {ok: true, value: {assistantMessage: message({id: "a2", role: "assistant", status: "streaming"})}};
        });
        const early = message({id: "a1", role: "assistant", text: "Early", status: "complete"});
        bridge.emit("chat:done", {conversationId: "c1", message: early});
        await chat.regenerate();
        expect(chat.state.messages.at(-1)).toMatchObject({id: "a2", text: "Fast", status: "complete"});
        expect(chat.generating).toBe(false);
    });

    test("regenerate replaces the last answer", async () => {
        const {bridge, chat} = setup();
        bridge.reply("chat:regenerate", {assistantMessage: message({id: "a9", role: "assistant", status: "streaming"})});
        expect(await chat.regenerate()).toBe(true);
        expect(chat.state.messages.map((m) => m.id)).toEqual(["u0", "a9"]);
        expect(chat.generating).toBe(true);
    });

    test("continue grows a cut answer in place; deltas may come before the response", async () => {
        const bridge = createFakeBridge();
        const chat = createChat(bridge.api, {now: () => 0});
        const cut = message({
            id: "a1",
            role: "assistant",
            thinking: "Let me",
            status: "stopped",
            thinkingTokens: 2,
            cut: {reason: "maxTokens", tokens: 2}
        });
        chat.open("c1", [message({id: "u1", role: "user", text: "q"}), cut]);
        expect(chat.canContinue).toBe(true);
        expect(chat.canRegenerate).toBe(true);
        bridge.handle("chat:continue", () => {
            bridge.emit("chat:delta", delta("thought", " think", 3, 0, 30));
            return {ok: true, value: {assistantMessage: message({...cut, status: "streaming", cut: null})}};
        });
        expect(await chat.continueAnswer()).toBe(true);
        expect(chat.state.messages).toHaveLength(2);
        expect(chat.state.messages[1]).toMatchObject({id: "a1", thinking: "Let me think", status: "streaming", cut: null});
        expect(chat.canContinue).toBe(false);
        bridge.emit("chat:done", {
            conversationId: "c1",
            message: message({id: "a1", role: "assistant", thinking: "Let me think", text: "4"})
        });
        expect(chat.canContinue).toBe(false);
        expect(await chat.continueAnswer()).toBe(false);
    });

    test("a refused continue puts the answer back as it was, with the reason", async () => {
        const bridge = createFakeBridge();
        const chat = createChat(bridge.api, {now: () => 0});
        chat.open("c1", [
            message({id: "u1", role: "user", text: "q"}),
            message({id: "a1", role: "assistant", text: "Part", status: "interrupted"})
        ]);
        bridge.handle("chat:continue", () => ({
            ok: false,
            error: {code: "MODEL_NOT_LOADED", message: "No model is loaded: open a model first"}
        }));
        expect(await chat.continueAnswer()).toBe(false);
        expect(chat.state.messages[1]).toMatchObject({status: "interrupted", text: "Part"});
        expect(chat.state.error).toMatch(/Could not continue the answer.*No model is loaded/);
        expect(chat.generating).toBe(false);
    });

    test("editing a message replaces it and what follows with the new branch", async () => {
        const {bridge, chat} = setup();
        bridge.handle("chat:edit", ({text}) => ({
            ok: true,
            value: {
                userMessage: message({id: "u9", role: "user", text, siblingIds: ["u0", "u9"]}),
                assistantMessage: message({id: "a9", role: "assistant", status: "streaming"})
            }
        }));
        expect(await chat.editMessage("u0", "  Better  ")).toBe(true);
        expect(bridge.calls.at(-1)).toEqual({channel: "chat:edit", payload: {conversationId: "c1", messageId: "u0", text: "Better"}});
        expect(chat.state.messages.map((m) => m.id)).toEqual(["u9", "a9"]);
        expect(chat.generating).toBe(true);
        expect(await chat.editMessage("u9", "again")).toBe(false);
    });

    test("showing another version loads that branch; a refusal keeps the one shown", async () => {
        const {bridge, chat} = setup();
        bridge.handle("conversations:switchBranch", ({id}) => ({
            ok: true,
            value: {
                conversation: {id, title: "t", createdAt: 0, updatedAt: 0, messageCount: 4, policy: "full"},
                settings: conversationSettings(),
                messages: [
                    message({id: "u0", role: "user"}),
                    message({id: "a7", role: "assistant", text: "Older", siblingIds: ["a7", "a0"]})
                ]
            }
        }));
        expect(await chat.showVersion("a7")).toBe(true);
        expect(chat.state.messages.map((m) => m.text)).toEqual(["", "Older"]);
        bridge.fail("conversations:switchBranch", "BUSY", "Stop the answer being written before switching versions");
        expect(await chat.showVersion("a0")).toBe(false);
        expect(chat.state.messages.at(-1)?.id).toBe("a7");
        expect(chat.state.error).toMatch(/Could not show that version: Stop the answer/);
    });

    test("deleting a message shows what the conversation holds then", async () => {
        const {bridge, chat} = setup();
        bridge.reply("conversations:deleteMessage", {
            conversation: {id: "c1", title: "t", createdAt: 0, updatedAt: 0, messageCount: 0, policy: "full"},
            settings: conversationSettings(),
            messages: []
        });
        expect(await chat.deleteMessage("u0")).toBe(true);
        expect(bridge.calls.at(-1)).toEqual({channel: "conversations:deleteMessage", payload: {id: "c1", messageId: "u0"}});
        expect(chat.state.messages).toEqual([]);
    });

    test("stop asks the backend to stop the open conversation", async () => {
        const {bridge, chat} = setup();
        bridge.reply("chat:stop", undefined);
        await chat.stop();
        expect(bridge.calls).toEqual([{channel: "chat:stop", payload: {conversationId: "c1"}}]);
        expect(chat.state.error).toBeNull();
    });

    test("errors surface as readable messages and keep the conversation as it was", async () => {
        const {bridge, chat} = setup();
        bridge.fail("chat:send", "MODEL_NOT_LOADED", "");
        expect(await chat.send("Question")).toBe(false);
        expect(chat.state.error).toBe("Could not send the message: No model is loaded: load one from the model panel");
        expect(chat.state.messages).toHaveLength(2);
        expect(chat.generating).toBe(false);

        bridge.handle("chat:stop", () => Promise.reject(new Error("IPC channel closed")));
        await chat.stop();
        expect(chat.state.error).toBe("Could not stop the generation: IPC channel closed");
    });

    test("an empty message is not sent", async () => {
        const {bridge, chat} = setup();
        expect(await chat.send("   ")).toBe(false);
        expect(bridge.calls).toEqual([]);
    });

    test("dispose removes the event listeners", () => {
        const {bridge, chat} = setup();
        expect(bridge.listenerCount("chat:delta")).toBe(1);
        chat.dispose();
        expect(bridge.listenerCount("chat:delta")).toBe(0);
        expect(bridge.listenerCount("chat:done")).toBe(0);
    });
});
