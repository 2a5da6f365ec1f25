import type {LlamaModel} from "node-llama-cpp";
import type {WrittenText} from "./writtenTexts.js";

/**
 * Tokens the model may write on each held-out question of written texts: a quarter more than the longest of their
 * written first answers (thought and answer), at most `limit`.
 */
export function validationTokens(model: LlamaModel, heldOut: WrittenText[], limit: number): number {
    const longest = Math.max(...heldOut.map((text) => model.tokenize(`${text.turns[0]!.thought}\n${text.turns[0]!.answer}`).length));
    return Math.min(limit, Math.max(64, Math.ceil(longest * 1.25) + 16));
}
