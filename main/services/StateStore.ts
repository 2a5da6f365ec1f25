import {randomUUID} from "node:crypto";
import fs from "node:fs";
import path from "node:path";

export type StateStoreOptions = {
    /** Bytes the state files may take on disk together; the oldest go first past it. Defaults to 4 GiB. */
    budgetBytes?: number;
};

/** A state file kept under the budget: its size and when it was written. */
type Entry = {path: string; bytes: number; mtimeMs: number};

/**
 * Where conversations' KV states live on disk (`<dir>/<conversation>/<message>.state`, one file per branch tip: the
 * answer a state was saved after; the API server's in `<dir>/api/`), the disk budget they share (oldest first out) and
 * their deletion with their conversation or message. The engine writes and reads the files; this only names, counts and
 * removes them.
 */
export class StateStore {
    private _budgetBytes: number;

    constructor(
        private readonly _dir: string,
        options: StateStoreOptions = {}
    ) {
        this._budgetBytes = options.budgetBytes ?? defaultStateBudgetBytes;
    }

    /** The disk budget (the settings' `stateDiskBudgetMib`); `0` saves no state. Lowering it does not trim: call `trim`. */
    get budgetBytes(): number {
        return this._budgetBytes;
    }

    set budgetBytes(bytes: number) {
        if (!Number.isFinite(bytes) || bytes < 0) throw new Error(`not a disk budget: ${bytes}`);
        this._budgetBytes = bytes;
    }

    /** Whether states are saved at all (a budget of 0 saves none). */
    get saving(): boolean {
        return this._budgetBytes > 0;
    }

    /** The bytes and files the states take on disk now. */
    usage(): {bytes: number; files: number} {
        const entries = this._entries();
        return {bytes: entries.reduce((sum, entry) => sum + entry.bytes, 0), files: entries.length};
    }

    /** Deletes every state (each conversation then reads its history again). */
    clear(): void {
        for (const entry of this._entries()) fs.rmSync(entry.path, {force: true});
    }

    /** The file of the state saved after `messageId`. Ids are UUIDs; anything else is refused. */
    pathOf(conversationId: string, messageId: string): string {
        for (const id of [conversationId, messageId]) if (!idPattern.test(id)) throw new Error(`not an id: ${id}`);
        return path.join(this._dir, conversationId, `${messageId}.state`);
    }

    /** Makes the conversation's folder, for a state about to be saved there; returns the file's path. */
    prepare(conversationId: string, messageId: string): string {
        const file = this.pathOf(conversationId, messageId);
        fs.mkdirSync(path.dirname(file), {recursive: true});
        return file;
    }

    /** The conversation and message a state file belongs to; `null` for the API server's and for any other path. */
    ownerOf(file: string): {conversationId: string; messageId: string} | null {
        const relative = path.relative(this._dir, file).split(path.sep);
        if (relative.length !== 2 || relative[0] === apiFolder || !relative[1]!.endsWith(".state")) return null;
        const [conversationId, name] = relative as [string, string];
        const messageId = name.slice(0, -".state".length);
        return idPattern.test(conversationId) && idPattern.test(messageId) ? {conversationId, messageId} : null;
    }

    /** Whether `file` is one of the API server's states. */
    isApiState(file: string): boolean {
        return path.dirname(file) === path.join(this._dir, apiFolder) && file.endsWith(".state");
    }

    /** A new file for an API request's state (its folder made). */
    prepareApi(): string {
        const dir = path.join(this._dir, apiFolder);
        fs.mkdirSync(dir, {recursive: true});
        return path.join(dir, `${randomUUID()}.state`);
    }

    /** The API server's states, newest first. */
    apiStates(): string[] {
        const dir = path.join(this._dir, apiFolder);
        if (!fs.existsSync(dir)) return [];
        return fs
            .readdirSync(dir)
            .filter((name) => name.endsWith(".state"))
            .map((name) => ({file: path.join(dir, name), mtimeMs: fs.statSync(path.join(dir, name), {throwIfNoEntry: false})?.mtimeMs}))
            .filter((entry): entry is {file: string; mtimeMs: number} => entry.mtimeMs != null)
            .sort((a, b) => b.mtimeMs - a.mtimeMs)
            .map((entry) => entry.file);
    }

    /** Keeps the newest `max` API states, deleting the others; returns how many went. */
    trimApi(max: number): number {
        const old = this.apiStates().slice(max);
        for (const file of old) fs.rmSync(file, {force: true});
        return old.length;
    }

    /**
     * Deletes what a process killed while writing or loading a state left: its temporary files (a state is written under a
     * temporary name and renamed, so a kill never leaves half a state). Call at start-up, when no engine writes.
     */
    removeTemporary(): number {
        if (!fs.existsSync(this._dir)) return 0;
        let removed = 0;
        for (const folder of fs.readdirSync(this._dir, {withFileTypes: true})) {
            if (!folder.isDirectory()) continue;
            const dir = path.join(this._dir, folder.name);
            for (const name of fs.readdirSync(dir)) {
                if (/\.state\.[0-9a-f]+\.(load\.)?tmp(\.llama)?$/.test(name)) {
                    fs.rmSync(path.join(dir, name), {force: true});
                    removed++;
                }
            }
        }
        return removed;
    }

    /** Bytes of the state saved after `messageId`, or `null` when there is none. */
    sizeOf(conversationId: string, messageId: string): number | null {
        try {
            return fs.statSync(this.pathOf(conversationId, messageId)).size;
        } catch {
            return null;
        }
    }

    deleteConversation(conversationId: string): void {
        fs.rmSync(path.join(this._dir, path.basename(conversationId)), {recursive: true, force: true});
    }

    deleteMessages(conversationId: string, messageIds: readonly string[]): void {
        for (const id of messageIds) fs.rmSync(this.pathOf(conversationId, id), {force: true});
    }

    /** Deletes the conversation's states whose message no longer `exists`. */
    deleteMissing(conversationId: string, exists: (messageId: string) => boolean): void {
        const dir = path.dirname(this.pathOf(conversationId, "x"));
        if (!fs.existsSync(dir)) return;
        for (const name of fs.readdirSync(dir))
            if (name.endsWith(".state") && !exists(name.slice(0, -".state".length))) fs.rmSync(path.join(dir, name), {force: true});
    }

    /** Deletes the oldest states (by write time) until all of them fit the budget; `keep` is never deleted. */
    trim(keep?: string): number {
        const entries = this._entries().sort((a, b) => a.mtimeMs - b.mtimeMs);
        let total = entries.reduce((sum, entry) => sum + entry.bytes, 0);
        let removed = 0;
        for (const entry of entries) {
            if (total <= this.budgetBytes) break;
            if (entry.path === keep) continue;
            fs.rmSync(entry.path, {force: true});
            total -= entry.bytes;
            removed++;
        }
        return removed;
    }

    private _entries(): Entry[] {
        const entries: Entry[] = [];
        if (!fs.existsSync(this._dir)) return entries;
        for (const folder of fs.readdirSync(this._dir, {withFileTypes: true})) {
            if (!folder.isDirectory()) continue;
            const dir = path.join(this._dir, folder.name);
            for (const name of fs.readdirSync(dir)) {
                if (!name.endsWith(".state")) continue;
                const file = path.join(dir, name);
                const stat = fs.statSync(file, {throwIfNoEntry: false});
                if (stat != null) entries.push({path: file, bytes: stat.size, mtimeMs: stat.mtimeMs});
            }
        }
        return entries;
    }
}

const idPattern = /^[A-Za-z0-9-]{1,64}$/;
/** The API server's states' folder (conversations' folders are UUIDs). */
const apiFolder = "api";

/** The default disk budget of the state files: 4 GiB. */
const defaultStateBudgetBytes = 4 * 1024 * 1024 * 1024;
