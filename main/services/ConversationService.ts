import {randomUUID} from "node:crypto";
import type {
    CompressionSettings,
    ConversationDetail,
    ConversationSettings,
    ConversationSummary,
    NewConversationCompression,
    SearchHit
} from "../../preload/contract.js";
import {AppError} from "../AppError.js";
import type {AppDatabase} from "../db/AppDatabase.js";
import type {ConversationRow} from "../db/types.js";
import {assertBudgetWithinCap, budgetChanged, type CapModel} from "../kv/budgetCap.js";
import {toConversationSummary, toMessageDto} from "./dto.js";
import {compressionSettingsFields, conversationSettingsSchema, mergeConversationSettings} from "./schemas.js";
import type {StateStore} from "./StateStore.js";
import type {SettingsService} from "./SettingsService.js";
import type {Clock} from "./types.js";
import {importedRows, maxImportBytes, parseConversationFile} from "./importConversation.js";

export const defaultConversationTitle = "New conversation";

export class ConversationService {
    /** The conversations' KV states on disk, deleted with their conversation or message (AppServices sets it). */
    states: StateStore | null = null;

    /**
     * What new conversations start under when no default compression was saved (`firstMinuteCompression`, AppServices
     * sets it for the loaded model); `null`: the defaults.
     */
    firstCompression: CompressionSettings | null = null;

    /** `loadedModel`: the model a new budget is checked against (`budgetCap`); none, nothing to check. */
    constructor(
        private readonly _db: AppDatabase,
        private readonly _settings: SettingsService,
        private readonly _now: Clock,
        private readonly _loadedModel: () => CapModel | null = () => null
    ) {}

    list(query?: string): ConversationSummary[] {
        const defaults = this._settings.get().defaultConversationSettings;
        return this._db.conversations.list(query).map((row) => this._summary(row, defaults));
    }

    /** A conversation as the list shows it: with the policy of its settings (over `defaults`, as `settingsOf` reads them). */
    private _summary(row: ConversationRow, defaults = this._settings.get().defaultConversationSettings): ConversationSummary {
        let policy: unknown;
        try {
            policy = (JSON.parse(row.settings) as {compression?: {policy?: unknown}} | null)?.compression?.policy;
        } catch {
            // A damaged settings column reads as the defaults.
        }
        const valid = compressionSettingsFields.shape.policy.safeParse(policy);
        return toConversationSummary(row, valid.success ? valid.data : defaults.compression.policy);
    }

    /**
     * Messages whose text or thinking contain every word of `query` (a word may be the start of a longer one), best
     * first. Punctuation separates words; FTS5 syntax is not interpreted, so any text is a valid search.
     */
    searchMessages(query: string, limit = 50): SearchHit[] {
        const terms = searchTerms(query);
        if (terms.length === 0) return [];
        const match = terms.map((term) => `"${term}"*`).join(" ");
        return this._db.messages.search(match, limit).map((row) => {
            const inText = row.text_snippet.includes("\u0002");
            return {
                conversationId: row.conversation_id,
                conversationTitle: row.title,
                messageId: row.message_id,
                role: row.role,
                field: inText || !row.thinking_snippet.includes("\u0002") ? "text" : "thinking",
                snippet: inText || !row.thinking_snippet.includes("\u0002") ? row.text_snippet : row.thinking_snippet,
                terms
            };
        });
    }

    /**
     * Shows another version of a message: the path through it, continued below by the versions last viewed there
     * (the newest where none was).
     */
    switchBranch(id: string, messageId: string): ConversationDetail {
        this._require(id);
        let row = this._db.messages.get(messageId);
        if (row == null || row.conversation_id !== id) throw new AppError("NOT_FOUND", "That message is not in this conversation");
        for (let child = this._db.messages.shownChild(row); child != null; child = this._db.messages.shownChild(child)) row = child;
        this._db.conversations.setLeaf(id, row.id);
        return this.get(id);
    }

    /** What a conversation created now starts under: `firstCompression` while no default compression was saved, else the default. */
    newCompression(): NewConversationCompression {
        const defaults = this._settings.get().defaultConversationSettings;
        return this.firstCompression != null && !this._settings.savedCompression()
            ? {compression: this.firstCompression, source: "gates"}
            : {compression: defaults.compression, source: "default"};
    }

    create(title?: string): ConversationSummary {
        const id = randomUUID();
        const settings = {...this._settings.get().defaultConversationSettings, compression: this.newCompression().compression};
        this._db.conversations.insert({
            id,
            title: cleanTitle(title) ?? defaultConversationTitle,
            settings: JSON.stringify(settings),
            now: this._now()
        });
        return this._summary(this._require(id));
    }

    rename(id: string, title: string): ConversationSummary {
        const clean = cleanTitle(title);
        if (clean == null) throw new AppError("BAD_REQUEST", "A conversation title cannot be empty");
        if (!this._db.conversations.rename(id, clean, this._now())) throw notFound(id);
        return this._summary(this._require(id));
    }

    delete(id: string): void {
        if (!this._db.conversations.delete(id)) throw notFound(id);
        this.states?.deleteConversation(id);
    }

    /**
     * Deletes a message and everything after it in every branch. The conversation then shows another version of it
     * (the one before, else the one after) or, without one, the path up to the message before it.
     */
    deleteMessage(id: string, messageId: string): ConversationDetail {
        this._require(id);
        const row = this._db.messages.get(messageId);
        if (row == null || row.conversation_id !== id) throw new AppError("NOT_FOUND", "That message is not in this conversation");
        const siblings = this._db.messages.siblingIds(row);
        const index = siblings.indexOf(row.id);
        const next = siblings[index - 1] ?? siblings[index + 1] ?? null;
        const shown = this._db.messages.listByConversation(id).some((message) => message.id === row.id);
        this._db.transaction(() => {
            this._db.messages.delete(row.id);
            if (shown) {
                let leaf =
                    next != null ? this._db.messages.get(next) : row.parent_id != null ? this._db.messages.get(row.parent_id) : undefined;
                if (next != null)
                    for (let child = leaf && this._db.messages.shownChild(leaf); child != null; child = this._db.messages.shownChild(child))
                        leaf = child;
                this._db.conversations.setLeaf(id, leaf?.id ?? null);
            }
            this._db.conversations.touch(id, this._now());
        });
        // The states saved after the message and after everything deleted with it.
        this.states?.deleteMissing(id, (message) => this._db.messages.get(message) != null);
        return this.get(id);
    }

    /** A new conversation with the path up to `messageId` (copied) and the same settings: the original is unchanged. */
    fork(id: string, messageId: string): ConversationSummary {
        const source = this._require(id);
        const path = this._db.messages.listByConversation(id);
        const end = path.findIndex((message) => message.id === messageId);
        if (end < 0) throw new AppError("NOT_FOUND", "Fork at a message of the path shown in this conversation");
        if (path.slice(0, end + 1).some((message) => message.status === "streaming"))
            throw new AppError("BUSY", "Wait for the answer to finish before forking at it");
        const forkId = randomUUID();
        const now = this._now();
        this._db.transaction(() => {
            this._db.conversations.insert({id: forkId, title: cleanTitle(`${source.title} (fork)`)!, settings: source.settings, now});
            this._db.messages.copyPath(path.slice(0, end + 1), forkId, randomUUID, now);
        });
        return this._summary(this._require(forkId));
    }

    /**
     * Adds a conversation from Ponder's JSON export: its title, settings (checked field by field against the current
     * defaults, as stored ones are) and messages, as a new conversation; a file that is not one changes nothing.
     */
    importFile(content: string): ConversationSummary {
        if (content.length > maxImportBytes)
            throw new AppError("BAD_REQUEST", `The conversation file is larger than ${maxImportBytes / 1024 / 1024} MiB`);
        const parsed = parseConversationFile(content);
        if ("error" in parsed) throw new AppError("BAD_REQUEST", parsed.error);
        const {file} = parsed;
        const id = randomUUID();
        const now = this._now();
        const title = cleanTitle(file.conversation.title) ?? defaultConversationTitle;
        this._db.transaction(() => {
            this._db.conversations.insert({id, title, settings: JSON.stringify(file.settings), now});
            // Stored normalised: a field the file gets wrong takes the default.
            this._db.conversations.updateSettings(id, JSON.stringify(this.settingsOf(this._require(id))), now);
            this._db.messages.copyPath(importedRows(file, now), id, randomUUID, now);
        });
        return this._summary(this._require(id));
    }

    get(id: string): ConversationDetail {
        const row = this._require(id);
        return {
            conversation: this._summary(row),
            settings: this.settingsOf(row),
            messages: this._db.messages
                .listByConversation(id)
                .map((row) => ({...toMessageDto(row), siblingIds: this._db.messages.siblingIds(row)}))
        };
    }

    updateSettings(id: string, patch: Partial<ConversationSettings>): ConversationSettings {
        const current = this.settingsOf(this._require(id));
        const merged = conversationSettingsSchema.parse({
            ...current,
            ...patch,
            compression: patch.compression == null ? current.compression : {...current.compression, ...patch.compression}
        });
        if (budgetChanged(current.compression, merged.compression)) assertBudgetWithinCap(this._loadedModel(), merged.compression);
        this._db.conversations.updateSettings(id, JSON.stringify(merged), this._now());
        return merged;
    }

    /** Stored settings over the current defaults (see mergeConversationSettings). */
    settingsOf(row: ConversationRow): ConversationSettings {
        let stored: unknown = {};
        try {
            stored = JSON.parse(row.settings);
        } catch {
            // A damaged settings column must not make the conversation unreadable.
        }
        return mergeConversationSettings(this._settings.get().defaultConversationSettings, stored);
    }

    require(id: string): ConversationRow {
        return this._require(id);
    }

    private _require(id: string): ConversationRow {
        const row = this._db.conversations.get(id);
        if (row == null) throw notFound(id);
        return row;
    }
}

function notFound(id: string): AppError {
    return new AppError("NOT_FOUND", `Conversation ${id} does not exist`);
}

/** A title on one line, at most 120 characters; `null` when nothing is left. */
export function cleanTitle(title: string | undefined): string | null {
    const clean = (title ?? "").replace(/\s+/g, " ").trim().slice(0, 120);
    return clean === "" ? null : clean;
}

/** The words of a search, as FTS5's unicode61 tokenizer splits them (at most 8). */
export function searchTerms(query: string): string[] {
    return (query.match(/[\p{L}\p{N}\p{M}]+/gu) ?? []).slice(0, 8);
}
