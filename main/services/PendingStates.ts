import type {MessageDto, MessageStats} from "../../preload/contract.js";
import type {AppDatabase} from "../db/AppDatabase.js";
import type {MessageRow} from "../db/types.js";
import type {EngineApi, StateSave} from "../engine/EngineApi.js";
import type {StateStore} from "./StateStore.js";
import type {Emit} from "./types.js";

export type PendingStatesOptions = {
    /** Where conversations' KV states are kept. Defaults to none (nothing is ever pending). */
    states?: StateStore;
    /**
     * How long quitting waits for the KV state an answer left unwritten to be written, in milliseconds; past it the app
     * quits without it and says so in the log. Defaults to `3000`.
     */
    quitSaveMs?: number;
    /** Where notes for the log go. Defaults to `console.warn`. */
    log?: (message: string) => void;
};

/** An answer whose KV state the engine holds unwritten (`StateOutcome.pending`), and its file. */
type Unsaved = {conversationId: string; messageId: string; path: string};

/**
 * When the KV state a Full KV answer leaves in the engine (unwritten, so an answer never waits for its write) goes to
 * disk: when the person opens another conversation, at once when they had left before the answer ended, and when the app
 * quits (within `quitSaveMs`). The engine writes it on its own before another request takes the context; whatever
 * becomes of it is heard here, and the answer gets the state's figures (or loses its `statePending` mark).
 */
export class PendingStates {
    /** The conversation the app shows (`opened`); `null` before any. */
    private _shown: string | null = null;
    private _unsaved: Unsaved | null = null;
    /** State writes asked for in the background, until they end. */
    private readonly _writes = new Set<Promise<unknown>>();

    constructor(
        private readonly _db: AppDatabase,
        private readonly _engine: EngineApi,
        private readonly _emit: Emit,
        /** A message as the renderer gets it (with its versions). */
        private readonly _dto: (row: MessageRow) => MessageDto,
        private readonly _options: PendingStatesOptions = {}
    ) {
        _engine.onStateSettled((save) => {
            try {
                this._settled(save);
            } catch {
                // heard after the database closed (a write that outlived quitting): nothing left to record it in
            }
        });
    }

    /** An answer ended; `pending`: the file of the state it left in the engine (`StateOutcome.pending`), if any. */
    answered(conversationId: string, messageId: string, pending: string | undefined): void {
        if (pending != null) this._unsaved = {conversationId, messageId, path: pending};
    }

    /** The answer is stored and shown: its state is written at once when the person had left its conversation meanwhile. */
    finished(conversationId: string, messageId: string): void {
        if (this._unsaved?.messageId === messageId && this._shown !== conversationId) this._write(this._unsaved.path);
    }

    /**
     * The app now shows `conversationId`. An answer's KV state left unwritten in another conversation is written now, in
     * the background: the person left it, so the next answer in the engine is likely another conversation's.
     */
    opened(conversationId: string): void {
        this._shown = conversationId;
        const unsaved = this._unsaved;
        if (unsaved == null || unsaved.conversationId === conversationId) return;
        if (this._db.messages.get(unsaved.messageId) == null) {
            // Deleted meanwhile: not worth writing (a write another request causes is deleted when heard of).
            this._unsaved = null;
            return;
        }
        this._write(unsaved.path);
    }

    /** `message` marked `statePending` when the engine holds its KV state unwritten. */
    mark(message: MessageDto): MessageDto {
        if (this._unsaved?.messageId !== message.id || message.stats == null) return message;
        return {...message, stats: {...message.stats, statePending: true}};
    }

    /** Resolves when the state writes asked for in the background have ended. */
    async written(): Promise<void> {
        while (this._writes.size > 0) await Promise.allSettled([...this._writes]);
    }

    /**
     * Writes the KV state the engine holds unwritten (the chat's or the API server's), waiting `quitSaveMs` at most:
     * quitting never hangs on it. Giving up is said in the log.
     */
    async writeBeforeQuit(): Promise<void> {
        const limitMs = this._options.quitSaveMs ?? 3000;
        let timer: NodeJS.Timeout | undefined;
        const gaveUp = Symbol("gave up");
        const outcome = await Promise.race([
            this._engine.saveState().catch((err: unknown): StateSave => ({
                path: "",
                saved: null,
                note: `The KV state could not be saved: ${(err as Error).message}`
            })),
            new Promise<typeof gaveUp>((resolve) => (timer = setTimeout(() => resolve(gaveUp), limitMs)))
        ]);
        clearTimeout(timer);
        const log = this._options.log ?? ((message: string) => console.warn(message));
        if (outcome === gaveUp)
            log(
                `Quitting without the KV state being saved: writing it took longer than ${limitMs / 1000} s. That conversation reads its history again next time.`
            );
        else if (outcome != null && outcome.saved == null && outcome.note != null) log(`Quitting: ${outcome.note}`);
    }

    /**
     * Writes the engine's unwritten state of `path` in the background; failures are notes, never an error. The engine
     * reports the outcome (`_settled`); one that no longer holds the state (it restarted) has none to report.
     */
    private _write(path: string): void {
        const write = this._engine
            .saveState(path)
            .catch(() => null)
            .then((save) => {
                if (save == null && this._unsaved?.path === path)
                    this._settled({path, saved: null, note: "The engine no longer holds this state"});
            })
            .finally(() => this._writes.delete(write));
        this._writes.add(write);
    }

    /**
     * A state that waited in the engine stopped waiting (written, not written, or superseded by a later answer): its answer
     * loses the mark and, when written, takes the figures a state saved during the answer's own run gets. A file written
     * for a message deleted meanwhile is deleted.
     */
    private _settled(save: StateSave): void {
        const store = this._options.states;
        const owner = store?.ownerOf(save.path);
        if (store == null || owner == null) return;
        const waited = this._unsaved?.path === save.path;
        if (waited) this._unsaved = null;
        const row = this._db.messages.get(owner.messageId);
        if (row == null || row.conversation_id !== owner.conversationId) {
            if (save.saved != null) store.deleteMessages(owner.conversationId, [owner.messageId]);
            return;
        }
        // An answer being continued gets its figures when it ends.
        if (row.status === "streaming" || (save.saved == null && !waited)) return;
        if (save.saved != null) {
            const {bytes, tokens, liveCells, liveBytes, fullBytes} = save.saved;
            this._db.messages.setStats(
                row.id,
                JSON.stringify({...parseStats(row.stats), savedState: {bytes, tokens, liveCells, liveBytes, fullBytes}})
            );
            try {
                store.trim(save.path);
            } catch {
                // the next save trims again
            }
        }
        const updated = this._db.messages.get(row.id);
        // The answer as stored, with its figures and without the mark (the renderer takes a finished answer as it comes).
        if (updated != null) this._emit("chat:done", {conversationId: owner.conversationId, message: this._dto(updated)});
    }
}

function parseStats(json: string): Partial<MessageStats> {
    try {
        const stats = JSON.parse(json) as unknown;
        return stats != null && typeof stats === "object" ? (stats as Partial<MessageStats>) : {};
    } catch {
        return {};
    }
}
