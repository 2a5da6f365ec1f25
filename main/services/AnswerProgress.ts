import type {MessageRow} from "../db/types.js";
import type {AppDatabase} from "../db/AppDatabase.js";
import type {GenerationChunk} from "../engine/EngineApi.js";

/** An answer's text, thinking, counts and times so far, as its row stores them. */
export type AnswerFields = Pick<
    MessageRow,
    "text" | "thinking" | "thinking_tokens" | "answer_tokens" | "thinking_ms" | "total_ms" | "first_token_ms"
>;

/**
 * An answer as it streams: what has arrived, saved to its row at most every `flushIntervalMs` (each save appends what
 * came after the last), so a killed process leaves the partial answer behind. A continuation goes on from what the
 * answer holds, its times included. A save that fails (a full disk) aborts `signal`, so the answer stops: what was saved
 * before stays, and `storageError` says why the rest was not.
 */
export class AnswerProgress {
    readonly fields: AnswerFields;
    /** When the answer's generation started, its earlier time taken off for a continuation. */
    readonly started: number;
    private _lastSave: number;
    /** How much of the text and thinking is saved. */
    private readonly _saved: {text: number; thinking: number};
    private readonly _storage = new AbortController();
    private _storageError: unknown = null;

    /** `continued`: the answer's row, when the generation continues it. */
    constructor(
        private readonly _db: AppDatabase,
        private readonly _messageId: string,
        continued: MessageRow | null,
        now: number,
        private readonly _flushIntervalMs: number
    ) {
        this.started = now - (continued != null ? continued.total_ms : 0);
        this.fields =
            continued != null
                ? {
                      text: continued.text,
                      thinking: continued.thinking,
                      thinking_tokens: continued.thinking_tokens,
                      answer_tokens: continued.answer_tokens,
                      thinking_ms: continued.thinking_ms,
                      total_ms: continued.total_ms,
                      first_token_ms: continued.first_token_ms
                  }
                : {text: "", thinking: "", thinking_tokens: 0, answer_tokens: 0, thinking_ms: 0, total_ms: 0, first_token_ms: null};
        this._lastSave = this.started;
        this._saved = {text: this.fields.text.length, thinking: this.fields.thinking.length};
    }

    /** Aborts when a save failed. */
    get signal(): AbortSignal {
        return this._storage.signal;
    }

    /** Why a save failed; `null` while none did. */
    get storageError(): unknown {
        return this._storageError;
    }

    /** Adds a chunk that arrived at `now`. */
    add(chunk: GenerationChunk, now: number): void {
        const fields = this.fields;
        fields.first_token_ms ??= now - this.started;
        if (chunk.segment === "thought") {
            fields.thinking += chunk.text;
            fields.thinking_tokens += chunk.tokens;
            fields.thinking_ms = now - this.started;
        } else {
            fields.text += chunk.text;
            fields.answer_tokens += chunk.tokens;
        }
        fields.total_ms = now - this.started;
    }

    /** Saves what came since the last save, when `flushIntervalMs` has passed since it (and no save failed). */
    saveIfDue(now: number): void {
        if (now - this._lastSave < this._flushIntervalMs || this._storageError != null) return;
        this._lastSave = now;
        const fields = this.fields;
        try {
            this._db.messages.appendProgress(this._messageId, {
                ...fields,
                text: fields.text.slice(this._saved.text),
                thinking: fields.thinking.slice(this._saved.thinking)
            });
            this._saved.text = fields.text.length;
            this._saved.thinking = fields.thinking.length;
        } catch (err) {
            this._storageError = err;
            this._storage.abort();
        }
    }
}
