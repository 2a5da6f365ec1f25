import type {ChatTurn} from "../engine/EngineApi.js";
import type {MessageRow} from "../db/types.js";

/** A stored message as a turn of the prompt; an answer that failed before writing anything is left out. */
export function toTurn(row: MessageRow): ChatTurn[] {
    if (row.role === "user") return [{role: "user", text: row.text}];
    if (row.status === "error" && row.text === "") return [];
    return [{role: "assistant", text: row.text, thinking: row.thinking}];
}

/**
 * The prompt's turns for the answer `answer` of `rows` (a conversation's path): every message before it, and, when it
 * goes on (`continuing`), the answer itself as written so far, even when it is empty.
 */
export function answerHistory(rows: MessageRow[], answer: MessageRow, continuing: boolean): ChatTurn[] {
    return rows
        .filter((row) => (continuing ? row.seq <= answer.seq : row.id !== answer.id))
        .flatMap((row) => (row.id === answer.id ? [{role: "assistant" as const, text: row.text, thinking: row.thinking}] : toTurn(row)));
}
