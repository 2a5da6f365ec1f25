import type {ChatTurn} from "../engine/types.js";
import type {MessageRow} from "../db/types.js";

/** A stored message as a turn of the prompt; an answer that failed before writing anything is left out. */
export function toTurn(row: MessageRow): ChatTurn[] {
    if (row.role === "user") return [{role: "user", text: row.text}];
    if (row.status === "error" && row.text === "") return [];
    return [{role: "assistant", text: row.text, thinking: row.thinking}];
}
