// The JSON export read back: a round trip keeps every message, its thinking, statistics and cut, and the settings;
// a file that is not an export is refused with a sentence that says why, and adds nothing.
import {describe, expect, it} from "vitest";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {createDispatch} from "../../../main/ipc/dispatch.js";
import {createHandlers} from "../../../main/ipc/handlers.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {exportConversation} from "../../../main/services/exportConversation.js";
import {FakeEngine} from "./FakeEngine.js";

function setup() {
    const engine = new FakeEngine();
    const services = new AppServices(new AppDatabase(":memory:"), engine.asEngine(), () => {}, {
        version: "t",
        modelsDir: "/tmp/x",
        chat: {flushIntervalMs: 0}
    });
    return {engine, services};
}

/** What a message is, without what a new home changes (ids, its conversation). */
const portable = ({id, conversationId, siblingIds, ...rest}: ReturnType<AppServices["conversations"]["get"]>["messages"][number]) => (
    void id,
    void conversationId,
    void siblingIds,
    rest
);

describe("importing a conversation", () => {
    it("reads back its own JSON export: messages, thinking, statistics, a cut answer and the settings", async () => {
        const {services, engine} = setup();
        const c = services.conversations.create("Round trip");
        services.conversations.updateSettings(c.id, {temperature: 0.2, systemPrompt: "Be brief", maxTokens: 2});
        services.chat.send(c.id, "First");
        await services.chat.idle();
        services.conversations.updateSettings(c.id, {maxTokens: 100});
        engine.answer = ["Four"];
        services.chat.send(c.id, "Second");
        await services.chat.idle();
        const original = services.conversations.get(c.id);
        expect(original.messages[1]!.cut).not.toBeNull();

        const file = exportConversation(original, "json");
        const imported = services.conversations.importFile(file.content);
        expect(imported.id).not.toBe(c.id);
        expect(imported.title).toBe("Round trip");
        const copy = services.conversations.get(imported.id);
        expect(copy.messages.map(portable)).toEqual(original.messages.map(portable));
        expect(copy.settings).toEqual(original.settings);
        // The copy is a conversation like any other: searchable, and it chats on.
        expect(services.conversations.searchMessages("Second").some((hit) => hit.conversationId === imported.id)).toBe(true);
        services.chat.send(imported.id, "Third");
        await services.chat.idle();
        expect(services.conversations.get(imported.id).messages).toHaveLength(6);
    });

    it("refuses what is not an export, adding nothing, and takes damaged settings and a streaming answer as the app would", () => {
        const {services} = setup();
        const cases: Array<[string, RegExp]> = [
            ["not json", /The file is not JSON/],
            ["[]", /not valid/],
            [JSON.stringify({format: "chatgpt", version: 1, conversation: {title: "x"}, messages: []}), /not a Ponder conversation file/],
            [JSON.stringify({format: "ponder-conversation", version: 2, conversation: {title: "x"}, messages: []}), /newer Ponder/],
            [
                JSON.stringify({
                    format: "ponder-conversation",
                    version: 1,
                    conversation: {title: "x"},
                    messages: [{role: "system", text: "x"}]
                }),
                /at messages\.0\.role/
            ],
            [
                JSON.stringify({
                    format: "ponder-conversation",
                    version: 1,
                    conversation: {title: "x"},
                    messages: [{role: "user", text: 5}]
                }),
                /at messages\.0\.text/
            ],
            [
                JSON.stringify({
                    format: "ponder-conversation",
                    version: 1,
                    conversation: {title: "x"},
                    messages: [{role: "user", text: "a", thinkingTokens: -1}]
                }),
                /thinkingTokens/
            ]
        ];
        for (const [content, error] of cases) {
            expect(() => services.conversations.importFile(content), content).toThrow(error);
            try {
                services.conversations.importFile(content);
            } catch (err) {
                expect((err as {code?: string}).code).toBe("BAD_REQUEST");
            }
        }
        expect(services.conversations.list()).toHaveLength(0);

        const imported = services.conversations.importFile(
            JSON.stringify({
                format: "ponder-conversation",
                version: 1,
                conversation: {title: "   "},
                settings: {temperature: "hot", maxTokens: 77},
                messages: [
                    {role: "user", text: "q"},
                    {role: "assistant", text: "half", thinking: "hmm", status: "streaming", stats: "junk"}
                ]
            })
        );
        expect(imported.title).toBe("New conversation");
        const detail = services.conversations.get(imported.id);
        expect(detail.settings.temperature).toBe(0.6);
        expect(detail.settings.maxTokens).toBe(77);
        expect(detail.messages.map((m) => [m.role, m.status, m.text, m.thinking, m.stats])).toEqual([
            ["user", "complete", "q", "", null],
            ["assistant", "interrupted", "half", "hmm", null]
        ]);
    });

    it("keeps an answer's token records and prune rounds when they have the shape the memory panel reads, and drops them otherwise", () => {
        const {services} = setup();
        const tokens = {kind: "attention", layers: 4, positions: [0, 5], scores: [0.5, null], rounds: [2, 1], keptBy: ["f", "3"]};
        const rounds = [{first: 1, last: 1, step: 0, tokensSeen: 40, evicted: [3, 9]}];
        const file = (stats: object) =>
            JSON.stringify({
                format: "ponder-conversation",
                version: 1,
                conversation: {title: "x"},
                messages: [
                    {role: "user", text: "q"},
                    {role: "assistant", text: "a", stats: {policy: "lethe", budgetCells: 64, samples: [], ...stats}}
                ]
            });
        const statsOf = (content: string) => services.conversations.get(services.conversations.importFile(content).id).messages[1]!.stats;
        expect(statsOf(file({tokens, rounds}))).toMatchObject({tokens, rounds});
        for (const damaged of [
            {...tokens, keptBy: ["f"]},
            {...tokens, keptBy: ["<b>", "3"]},
            {...tokens, kind: "other"},
            {...tokens, positions: [-1, 5]}
        ]) {
            const stats = statsOf(file({tokens: damaged, rounds: [{first: 1}]}));
            expect(stats).not.toHaveProperty("tokens");
            expect(stats).not.toHaveProperty("rounds");
            expect(stats?.policy).toBe("lethe");
        }
    });

    it("refuses a file over the size limit at the IPC boundary", async () => {
        const {services} = setup();
        const dispatch = createDispatch(
            createHandlers(services, {openExternal: async () => {}, pickModelFile: async () => null}),
            () => {}
        );
        const result = await dispatch("conversations:import", {content: "x".repeat(64 * 1024 * 1024 + 1)});
        expect(result).toMatchObject({ok: false, error: {code: "BAD_REQUEST"}});
        expect(await dispatch("conversations:import", {content: 5})).toMatchObject({ok: false, error: {code: "BAD_REQUEST"}});
    });
});
