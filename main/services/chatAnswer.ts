import type {CompressionSettings, ConversationSettings} from "../../preload/contract.js";
import type {AppDatabase} from "../db/AppDatabase.js";
import type {MessageRow} from "../db/types.js";
import type {ChatTurn} from "../engine/EngineApi.js";
import type {CompareRun} from "./compareWithFull.js";
import type {ConversationService} from "./ConversationService.js";
import {answerHistory} from "./toTurn.js";

/** A chat answer to generate, resolved once before it waits for its turn: what every later step reads, never changes. */
export type ChatAnswer = {
    readonly conversationId: string;
    readonly messageId: string;
    /** The answer's row as it was when the generation started. */
    readonly row: MessageRow;
    /** Whether the answer goes on from what it holds (Continue). */
    readonly continuing: boolean;
    /** Set for a Compare with Full KV run. */
    readonly compare: CompareRun | undefined;
    readonly settings: ConversationSettings;
    /** The compression it runs under: the compared run's, else the conversation's. */
    readonly compression: CompressionSettings;
    /** The conversation's messages as the generation started. */
    readonly rows: readonly MessageRow[];
    /** What the engine reads before the answer. */
    readonly history: ChatTurn[];
};

/** The answer `row` of the conversation, with its settings and history read once as its generation starts. */
export function chatAnswer(
    db: AppDatabase,
    conversations: ConversationService,
    conversationId: string,
    row: MessageRow,
    continuing: boolean,
    compare: CompareRun | undefined
): ChatAnswer {
    const settings = conversations.settingsOf(conversations.require(conversationId));
    const rows = db.messages.listByConversation(conversationId);
    return {
        conversationId,
        messageId: row.id,
        row,
        continuing,
        compare,
        settings,
        compression: compare?.compression ?? settings.compression,
        rows,
        history: answerHistory(rows, row, continuing)
    };
}
