import {randomInt, randomUUID} from "node:crypto";
import type {CompressionSettings, MessageCompression, MessageDto, MessageStats} from "../../preload/contract.js";
import {AppError} from "../AppError.js";
import type {AppDatabase} from "../db/AppDatabase.js";
import type {MessageRow} from "../db/types.js";
import type {EngineApi} from "../engine/EngineApi.js";
import {assertBudgetAboveMin, type ResolvedKv} from "../kv/resolveKv.js";
import type {CompressionService} from "./CompressionService.js";
import {AnswerProgress} from "./AnswerProgress.js";
import {chatAnswer, type ChatAnswer} from "./chatAnswer.js";
import {chatRequest} from "./chatRequest.js";
import {PendingStates, type PendingStatesOptions} from "./PendingStates.js";
import {stopOutcome, storageFailure} from "./stopOutcome.js";
import {finishedAnswer, type AnswerEnd} from "./finishedAnswer.js";
import {keptStates} from "./keptStates.js";
import type {StateStore} from "./StateStore.js";
import {cleanTitle, type ConversationService, defaultConversationTitle} from "./ConversationService.js";
import {compareRunFor, versionComparison, type CompareRun} from "./compareWithFull.js";
import {continueBlockedByBudget, parseCompression, toMessageDto} from "./dto.js";
import type {GenerationQueue} from "./GenerationQueue.js";
import {generationFailure, GenerationRunner} from "./GenerationRunner.js";
import type {Clock, Emit} from "./types.js";

export type ChatServiceOptions = {
    /** Save a streaming answer at least this often, in milliseconds. Defaults to `250`. */
    flushIntervalMs?: number;
    /** Sampling seed for every generation; unset samples freshly each time. */
    seed?: number;
    /** Memory samples kept per message; older ones are thinned out. Defaults to `400`. */
    maxSamples?: number;
    /** Where conversations' KV states are kept, so a conversation resumes without reading its history again. Defaults to none. */
    states?: StateStore;
} & Pick<PendingStatesOptions, "quitSaveMs" | "log">;

type Active = {conversationId: string; messageId: string; abort: AbortController; done: Promise<void>};

/**
 * Sends prompts and streams answers: the user's message and the answer's row are committed first,
 * the answer is saved as it grows, so a killed process leaves the partial answer behind.
 */
export class ChatService {
    private _active: Active | null = null;
    /** When the KV states Full KV answers leave in the engine are written. */
    private readonly _pending: PendingStates;
    /** The engine's turns, shared with the API server. */
    private readonly _runner: GenerationRunner;

    constructor(
        private readonly _db: AppDatabase,
        private readonly _engine: EngineApi,
        private readonly _conversations: ConversationService,
        private readonly _compression: Pick<CompressionService, "resolve">,
        private readonly _emit: Emit,
        private readonly _now: Clock,
        /** The engine's turns, shared with the API server. */
        private readonly _queue: GenerationQueue,
        private readonly _options: ChatServiceOptions = {}
    ) {
        this._pending = new PendingStates(_db, _engine, _emit, (row) => this._dto(row), _options);
        this._runner = new GenerationRunner(_engine, _queue, _compression);
    }

    /** Marks answers a previous process left streaming as interrupted. Call once at start-up. */
    recoverInterrupted(): number {
        return this._db.messages.markInterrupted(this._now());
    }

    send(conversationId: string, text: string): {userMessage: MessageDto; assistantMessage: MessageDto} {
        const conversation = this._conversations.require(conversationId);
        if (text.trim() === "") throw new AppError("BAD_REQUEST", "The message is empty");
        this._assertCanGenerate();

        const now = this._now();
        const {userRow, assistantRow} = this._db.transaction(() => {
            const rows = this._insertExchange(conversationId, text, now);
            if (conversation.title === defaultConversationTitle && conversation.message_count === 0)
                this._db.conversations.rename(conversationId, cleanTitle(text.slice(0, 60)) ?? defaultConversationTitle, now);
            else this._db.conversations.touch(conversationId, now);
            return rows;
        });

        this._start(conversationId, assistantRow);
        return {userMessage: this._dto(userRow), assistantMessage: this._dto(assistantRow)};
    }

    /**
     * Generates another version of the last answer; the earlier ones stay, as its siblings. With `compareFull`, the last
     * answer (made under a pruning policy) is made again under Full KV with the same seed and cache types, and the new
     * version records how it compares with it (`MessageCompression.comparison`).
     */
    regenerate(conversationId: string, options: {compareFull?: boolean} = {}): {assistantMessage: MessageDto} {
        this._conversations.require(conversationId);
        this._assertCanGenerate();
        const messages = this._db.messages.listByConversation(conversationId);
        const last = messages.at(-1);
        if (last == null) throw new AppError("BAD_REQUEST", "There is nothing to regenerate in an empty conversation");
        const compare = options.compareFull === true ? compareRunFor(last) : undefined;

        const now = this._now();
        const assistantRow = this._db.transaction(() => {
            this._db.conversations.touch(conversationId, now);
            return this._insertAssistant(conversationId, now, last.role === "assistant" ? last.parent_id : last.id, compare?.compression);
        });
        this._start(conversationId, assistantRow, false, compare);
        return {assistantMessage: this._dto(assistantRow)};
    }

    /**
     * Sends a new version of one of the user's messages: a sibling of it, answered afresh. The original and everything
     * after it stay, as another branch.
     */
    edit(conversationId: string, messageId: string, text: string): {userMessage: MessageDto; assistantMessage: MessageDto} {
        this._conversations.require(conversationId);
        if (text.trim() === "") throw new AppError("BAD_REQUEST", "The message is empty");
        const original = this._db.messages.get(messageId);
        if (original == null || original.conversation_id !== conversationId)
            throw new AppError("NOT_FOUND", "That message is not in this conversation");
        if (original.role !== "user")
            throw new AppError("BAD_REQUEST", "Only your own messages can be edited; regenerate an answer instead");
        this._assertCanGenerate();

        const now = this._now();
        const {userRow, assistantRow} = this._db.transaction(() => {
            const rows = this._insertExchange(conversationId, text, now, original.parent_id);
            this._db.conversations.touch(conversationId, now);
            return rows;
        });
        this._start(conversationId, assistantRow);
        return {userMessage: this._dto(userRow), assistantMessage: this._dto(assistantRow)};
    }

    /** A message with its versions (siblings), as the renderer shows it. */
    private _dto(row: MessageRow): MessageDto {
        return this._pending.mark({...toMessageDto(row), siblingIds: this._db.messages.siblingIds(row)});
    }

    /** The conversation's messages, the answer whose KV state the engine holds unwritten marked (`statePending`). */
    withStatePending<T extends {messages: MessageDto[]}>(detail: T): T {
        return {...detail, messages: detail.messages.map((message) => this._pending.mark(message))};
    }

    /**
     * Resumes the conversation's last answer where it ended early (cut off at its token limit, stopped, interrupted):
     * the same message grows, with a fresh allowance of max tokens.
     */
    continue(conversationId: string): {assistantMessage: MessageDto} {
        this._conversations.require(conversationId);
        this._assertCanGenerate();
        const last = this._db.messages.listByConversation(conversationId).at(-1);
        if (last == null || last.role !== "assistant")
            throw new AppError("BAD_REQUEST", "There is no answer to continue: the conversation does not end with one");
        if (last.status === "complete" && last.cut_reason == null)
            throw new AppError("BAD_REQUEST", "The last answer is complete: there is nothing to continue");
        if (last.status === "error" && last.text === "" && last.thinking === "")
            throw new AppError("BAD_REQUEST", "The last answer failed before it wrote anything: regenerate it instead");
        const blocked = continueBlockedByBudget(
            parseCompression(last.compression),
            this._conversations.settingsOf(this._conversations.require(conversationId)).compression
        );
        if (blocked != null) throw new AppError("KV_BUDGET_EXCEEDED", blocked);

        const now = this._now();
        this._db.transaction(() => {
            this._db.messages.markStreaming(last.id, now);
            this._recordCompression(last, null);
            this._db.conversations.touch(conversationId, now);
        });
        const row = this._db.messages.get(last.id)!;
        this._start(conversationId, row, true);
        return {assistantMessage: this._dto(row)};
    }

    /** Stops the answer being generated in this conversation; what it wrote so far is kept. */
    async stop(conversationId: string): Promise<void> {
        const active = this._active;
        if (active == null || active.conversationId !== conversationId) return;
        active.abort.abort();
        await active.done;
    }

    /** Whether an answer is being generated in this conversation. */
    generatingIn(conversationId: string): boolean {
        return this._active?.conversationId === conversationId;
    }

    /** Resolves when the current generation, if any, has finished and been saved. */
    async idle(): Promise<void> {
        await this._active?.done;
    }

    /**
     * The app now shows `conversationId`: an answer's KV state left unwritten in another conversation is written now, in
     * the background (PendingStates).
     */
    opened(conversationId: string): void {
        this._pending.opened(conversationId);
    }

    /** Resolves when the state writes asked for in the background have ended. */
    statesWritten(): Promise<void> {
        return this._pending.written();
    }

    /**
     * Stops the answer being written, then writes the KV state the engine holds unwritten, a few seconds at most
     * (`quitSaveMs`): quitting never hangs on it.
     */
    async dispose(): Promise<void> {
        this._active?.abort.abort();
        await this.idle();
        await this._pending.writeBeforeQuit();
    }

    private _assertCanGenerate(): void {
        if (this._active != null) throw new AppError("BUSY", "An answer is already being generated: stop it first");
        if (this._engine.inspection == null && this._engine.status.state === "loading")
            throw new AppError(
                "BUSY",
                `The model is loading: try again in a moment${this._engine.status.message != null ? ` (${this._engine.status.message})` : ""}`
            );
        if (this._engine.inspection == null) throw new AppError("MODEL_NOT_LOADED", "No model is loaded: open a model first");
        if (this._queue.full)
            throw new AppError("BUSY", "The engine is busy answering requests from the API server: try again in a moment");
    }

    /**
     * Adds the user's message after `parentId` (absent: the end of the path the conversation shows) and the answer to it,
     * still to be written.
     */
    private _insertExchange(
        conversationId: string,
        text: string,
        now: number,
        parentId?: string | null
    ): {userRow: MessageRow; assistantRow: MessageRow} {
        const userRow = this._db.messages.insert({
            id: randomUUID(),
            conversation_id: conversationId,
            role: "user",
            text,
            status: "complete",
            created_at: now,
            parent_id: parentId
        });
        return {userRow, assistantRow: this._insertAssistant(conversationId, now, userRow.id)};
    }

    private _insertAssistant(conversationId: string, now: number, parentId?: string | null, compression?: CompressionSettings): MessageRow {
        const row = this._db.messages.insert({
            id: randomUUID(),
            conversation_id: conversationId,
            role: "assistant",
            text: "",
            status: "streaming",
            created_at: now,
            parent_id: parentId,
            model_path: this._engine.inspection?.path ?? null
        });
        return this._recordCompression(row, null, compression);
    }

    /**
     * Records on the answer the compression it runs under: the conversation's settings as it starts (what `_generate`
     * reads), then its cells once the budget is resolved. Returns the row as stored.
     */
    private _recordCompression(row: MessageRow, budgetCells: number | null, compression?: CompressionSettings, seed?: number): MessageRow {
        const settings = compression ?? this._conversations.settingsOf(this._conversations.require(row.conversation_id)).compression;
        const record: MessageCompression = {policy: settings.policy, budgetCells, settings, ...(seed != null ? {seed} : {})};
        this._db.messages.setCompression(row.id, JSON.stringify(record));
        return {...row, compression: JSON.stringify(record)};
    }

    private _start(conversationId: string, assistantRow: MessageRow, continuing = false, compare?: CompareRun): void {
        const abort = new AbortController();
        const active: Active = {conversationId, messageId: assistantRow.id, abort, done: Promise.resolve()};
        this._active = active;
        // `_generate` reports its own failures as the message's error; nothing may reject unheard here.
        active.done = this._generate(conversationId, assistantRow, abort.signal, continuing, compare)
            .catch(() => {})
            .finally(() => {
                if (this._active === active) this._active = null;
            });
    }

    /** Generates the answer: resolved once, streamed at the engine's turn, then finished (stored and shown). */
    private async _generate(
        conversationId: string,
        assistantRow: MessageRow,
        signal: AbortSignal,
        continuing: boolean,
        compare?: CompareRun
    ): Promise<void> {
        const answer = chatAnswer(this._db, this._conversations, conversationId, assistantRow, continuing, compare);
        // What arrives is saved as it grows; a continuation goes on from what the answer holds, its times included.
        const progress = new AnswerProgress(
            this._db,
            answer.messageId,
            continuing ? assistantRow : null,
            this._now(),
            this._options.flushIntervalMs ?? 250
        );
        const end = await this._stream(answer, progress, signal);
        this._finish(answer, progress, end);
    }

    /**
     * Waits for the engine's turn and streams the answer; says how it ended, a failure included. Waits while the API
     * server generates: the answer shows as streaming, empty, until its turn. TRIM-KV without gates trained for the
     * loaded model: the answer fails with the reason, never runs as another policy.
     */
    private async _stream(answer: ChatAnswer, progress: AnswerProgress, signal: AbortSignal): Promise<AnswerEnd> {
        // The answer's statistics, made when its turn comes and the budget is resolved (`request` below).
        const turn: {stats: MessageStats | null} = {stats: null};
        try {
            const {kv, result} = await this._runner.run({
                signal,
                kv: {resolve: answer.compression},
                request: (kv) => {
                    const {seed, stats} = this._startTurn(answer, kv);
                    turn.stats = stats;
                    return chatRequest(answer, seed, {
                        emit: this._emit,
                        now: this._now,
                        progress,
                        stats,
                        maxSamples: this._options.maxSamples ?? 400,
                        states: this._options.states,
                        // A save that fails (a full disk) stops the answer: what was saved before stays, the rest is not lost silently.
                        signal: AbortSignal.any([signal, progress.signal])
                    });
                }
            });
            const states = keptStates(answer, result.states, this._options.states, this._pending);
            const outcome = stopOutcome(result.stopReason, {
                cells: kv.cells,
                maxTokens: answer.settings.maxTokens,
                cutBefore: answer.continuing ? (answer.row.cut_tokens ?? answer.row.thinking_tokens + answer.row.answer_tokens) : 0
            });
            return {...outcome, promptTokens: result.promptTokens, stats: turn.stats, states};
        } catch (err) {
            return {
                ...generationFailure(err),
                cutReason: null,
                cutTokens: null,
                budgetFull: false,
                promptTokens: 0,
                stats: turn.stats,
                states: {}
            };
        }
    }

    /**
     * The answer's turn has come with `kv`: refuses a budget below the minimum, draws the seed when none is set (kept,
     * so Compare with Full KV can sample the same way) and records both on the answer. Returns its statistics, empty.
     */
    private _startTurn(answer: ChatAnswer, kv: ResolvedKv): {seed: number; stats: MessageStats} {
        assertBudgetAboveMin(kv);
        const seed = answer.compare?.seed ?? answer.settings.seed ?? this._options.seed ?? randomInt(2 ** 31);
        this._recordCompression(answer.row, kv.cells, answer.compression, seed);
        return {seed, stats: {policy: answer.compression.policy, budgetCells: kv.cells, samples: []}};
    }

    /** Stores how the answer ended, with how it compares when it checks another version, and shows it. */
    private _finish(answer: ChatAnswer, progress: AnswerProgress, end: AnswerEnd): void {
        const {conversationId, messageId, compare} = answer;
        const now = this._now();
        const {finish, stats} = finishedAnswer(answer, progress, end, now);
        try {
            this._db.transaction(() => {
                this._db.messages.finish(messageId, finish, now);
                // Full KV stopped at its budget: recorded with the compression it ran under, so Continue can say why not.
                const record = parseCompression(this._db.messages.get(messageId)?.compression ?? null);
                const comparison =
                    compare != null && record != null
                        ? versionComparison(this._db.messages.get(compare.comparedWith), finish, stats)
                        : undefined;
                if (record != null && (record.budgetFull !== end.budgetFull || comparison != null))
                    this._db.messages.setCompression(
                        messageId,
                        JSON.stringify({...record, budgetFull: end.budgetFull || undefined, comparison})
                    );
                this._db.conversations.touch(conversationId, now);
            });
        } catch (err) {
            // The row keeps what was saved last and stays `streaming`, so the next start marks it interrupted.
            finish.status = "error";
            finish.error = storageFailure(err);
        }
        const stored = this._db.messages.get(messageId);
        if (stored != null) this._emit("chat:done", {conversationId, message: this._dto({...stored, ...finish, updated_at: now})});
        this._pending.finished(conversationId, messageId);
    }
}
