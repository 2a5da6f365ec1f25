import type {StateSave} from "../EngineApi.js";

/** A state a request asked to keep on disk that is still only in the live sequence. */
export type Deferred = {
    path: string;
    /** The context that holds it. */
    owner: object;
    /**
     * Tokens of the sequence a request must keep to continue its conversation: its prompt up to where the template renders
     * it otherwise once the answer is part of the history (the assistant's opening). Asked at most once, when needed.
     */
    continuedAt: () => number;
    /** Writes it (SequenceStates); called with the engine's lock held, the sequence as it was deferred. */
    write(): Promise<Omit<StateSave, "path">>;
};

/**
 * The engine's one unsaved state (Full KV's sequence after an answer), written off the answer's path: when asked (`flush`:
 * the user left the conversation, the app quits), or just before the context changes for a request that does not continue
 * it (`beforeChange`), so no conversation's state is lost to another. A request in the same context that keeps its prompt
 * continues that conversation, and its own state supersedes this one, which is then dropped unwritten.
 */
export class DeferredState {
    private _deferred: Deferred | null = null;

    /** `onSettled`: each state that stops waiting: written, refused with its note, or superseded. */
    constructor(private readonly _onSettled: (save: StateSave) => void) {}

    /** The file of the state waiting to be written; `null` when none waits. */
    get path(): string | null {
        return this._deferred?.path ?? null;
    }

    /** Keeps `deferred` to write later; a state still waiting is superseded by it. */
    defer(deferred: Deferred): void {
        const previous = this._deferred;
        this._deferred = deferred;
        if (previous != null) this._onSettled({path: previous.path, saved: null, note: null, superseded: true});
    }

    /** Forgets the state waiting, unwritten and unheard (the engine is disposed). */
    drop(): void {
        this._deferred = null;
    }

    /** Writes the state waiting, if any (with `path`, only that one); `null` when none did. A failed write is a note. */
    async flush(path?: string): Promise<StateSave | null> {
        const deferred = this._deferred;
        if (deferred == null || (path != null && deferred.path !== path)) return null;
        this._deferred = null;
        let save: StateSave;
        try {
            save = {path: deferred.path, ...(await deferred.write())};
        } catch (err) {
            save = {path: deferred.path, saved: null, note: `The KV state could not be saved: ${(err as Error).message}`};
        }
        this._onSettled(save);
        return save;
    }

    /**
     * The sequence of `owner` is about to change, keeping its first `kept` tokens (0: the context goes). A state waiting there
     * that the change continues is dropped; any other is written first.
     */
    async beforeChange(owner: object, kept: number): Promise<void> {
        const deferred = this._deferred;
        if (deferred == null) return;
        if (deferred.owner === owner && kept > 0 && kept >= deferred.continuedAt()) {
            this._deferred = null;
            this._onSettled({path: deferred.path, saved: null, note: null, superseded: true});
            return;
        }
        await this.flush();
    }
}
