import {
    mergeRanges,
    mergeTokenScores,
    type Events,
    type KvSample,
    type MessageCompression,
    type MessageDto,
    type PolicyId,
    type PonderApi,
    type PruneRound,
    type ReadReason,
    type SavedStateFigures,
    type TokenScores
} from "../../preload/contract.js";
import {createPointSeries, decimate, toPoint, type MemoryPoint} from "../lib/createPointSeries.js";
import {lastSample} from "../lib/formatMemory.js";
import type {Chat} from "./chat.svelte.js";

export type Memory = ReturnType<typeof createMemory>;

/**
 * A KV memory reading and where it comes from: `live` while its answer streams, otherwise the message's stored stats;
 * with the compression that answer ran under (its own, not the conversation's setting now), when known.
 */
export type MemoryReading = {messageId: string; sample: KvSample; live: boolean; compression?: MessageCompression | null};

export type MemoryOptions = {
    /** Shortest time between two updates of the gauge and charts while an answer streams (about 4 per second). Defaults to `250`. */
    throttleMs?: number;
    /** Points of the memory chart. Defaults to `400`. */
    maxPoints?: number;
    /** Clock in ms. Defaults to `Date.now`. */
    now?: () => number;
    /** How long a finished read of earlier turns stays on screen (a new message's clears at once). Defaults to `1500`. */
    rebuildLingerMs?: number;
};

/**
 * Which of the conversation's tokens the shown answer's cache still holds: `tokensSeen` positions, the answer's from
 * `answerStart`, and the ranges it evicted (`toRanges`' form; an earlier answer's evictions are not counted); what its
 * prune rounds recorded of each token (`scores`, `null` when none did) and, once finished, its rounds (empty while live
 * and for an answer stored without them), under its `policy` (`null` when not known).
 */
export type RememberedView = {
    messageId: string;
    tokensSeen: number;
    answerStart: number;
    evicted: number[];
    live: boolean;
    policy: PolicyId | null;
    scores: TokenScores | null;
    rounds: PruneRound[];
};

type Published = {messageId: string; sample: KvSample};

/**
 * KV memory of the open conversation: live `chat:memory` readings of the streaming answer (accumulated outside
 * Svelte's reactivity and published at most every `throttleMs`), the stored stats of finished answers, and the
 * progress of a long prompt read into the context, with why it is read.
 */
export function createMemory(bridge: PonderApi, chat: Chat, options: MemoryOptions = {}) {
    const throttleMs = options.throttleMs ?? 250;
    const maxPoints = options.maxPoints ?? 400;
    const now = options.now ?? (() => Date.now());
    const rebuildLingerMs = options.rebuildLingerMs ?? 1500;

    // Per-event bookkeeping: plain objects, never proxied.
    let liveMessageId: string | null = null;
    let latest: KvSample | null = null;
    /** The live answer's evicted positions so far: the union of its samples' deltas. */
    let liveEvicted: number[] = [];
    /** What the live answer's rounds recorded of its tokens so far. */
    let liveScores: TokenScores | null = null;
    const series = createPointSeries(maxPoints);
    let lastPublishAt = Number.NEGATIVE_INFINITY;
    let timer: ReturnType<typeof setTimeout> | null = null;
    let rebuildTimer: ReturnType<typeof setTimeout> | null = null;

    // What the UI sees.
    let published = $state.raw<Published | null>(null);
    let version = $state(0);
    const rebuild = $state({conversationId: null as string | null, progress: null as number | null, reason: "message" as ReadReason});

    function publish(): void {
        timer = null;
        lastPublishAt = now();
        if (liveMessageId != null && latest != null) published = {messageId: liveMessageId, sample: latest};
        version++;
    }

    function schedule(): void {
        if (timer != null) return;
        const wait = lastPublishAt + throttleMs - now();
        if (wait <= 0) publish();
        else timer = setTimeout(publish, wait);
    }

    function onMemory({conversationId, messageId, sample}: Events["chat:memory"]): void {
        if (conversationId !== chat.state.conversationId) return;
        if (messageId !== liveMessageId) {
            liveMessageId = messageId;
            liveEvicted = [];
            liveScores = null;
            series.clear();
        }
        latest = sample;
        if (sample.evicted != null && sample.evicted.length > 0) liveEvicted = mergeRanges(liveEvicted, sample.evicted);
        if (sample.tokens != null) liveScores = mergeTokenScores(liveScores ?? undefined, sample.tokens);
        series.push(sample);
        schedule();
    }

    function onRebuild({conversationId, progress, reason}: Events["chat:rebuild"]): void {
        if (conversationId !== chat.state.conversationId) return;
        if (rebuildTimer != null) clearTimeout(rebuildTimer);
        rebuildTimer = null;
        rebuild.conversationId = conversationId;
        rebuild.reason = reason;
        rebuild.progress = Math.min(1, Math.max(0, progress));
        // A new message read is done when the answer starts: nothing to say about it afterwards.
        if (progress >= 1 && reason === "message") rebuild.progress = null;
        else if (progress >= 1)
            rebuildTimer = setTimeout(() => {
                rebuildTimer = null;
                rebuild.progress = null;
            }, rebuildLingerMs);
    }

    /** The live reading of `message` when it has one it should show: while streaming, or when no stats were stored. */
    function liveOf(message: MessageDto): KvSample | null {
        if (published?.messageId !== message.id) return null;
        return message.status === "streaming" || lastSample(message.stats) == null ? published.sample : null;
    }

    /** What `message` ran under: its record, else what its stats knew (an answer imported without one). */
    function compressionOf(message: MessageDto): MessageCompression | null {
        if (message.compression != null) return message.compression;
        const stats = message.stats;
        return stats?.policy != null ? {policy: stats.policy, budgetCells: stats.budgetCells ?? null, settings: null} : null;
    }

    /** The answer the gauge and the strip describe: the latest one with any reading. */
    const shown = $derived(
        chat.state.messages.findLast(
            (message) => message.role === "assistant" && (lastSample(message.stats) != null || published?.messageId === message.id)
        ) ?? null
    );

    const current = $derived.by((): MemoryReading | null => {
        if (!shown) return null;
        const compression = compressionOf(shown);
        const live = liveOf(shown);
        if (live) return {messageId: shown.id, sample: live, live: shown.status === "streaming", compression};
        const stored = lastSample(shown.stats);
        return stored ? {messageId: shown.id, sample: stored, live: false, compression} : null;
    });

    /** The conversation's KV state on disk: the one the latest answer that saved one saved. */
    const savedState = $derived.by((): (SavedStateFigures & {messageId: string}) | null => {
        const message = chat.state.messages.findLast((candidate) => candidate.role === "assistant" && candidate.stats?.savedState != null);
        return message?.stats?.savedState != null ? {messageId: message.id, ...message.stats.savedState} : null;
    });

    /** Whether the engine holds the latest answer's KV state, to write to disk when the conversation is left or the app quits. */
    const statePending = $derived(
        chat.state.messages.findLast((candidate) => candidate.role === "assistant" && candidate.stats != null)?.stats?.statePending === true
    );

    /** Tokens the latest finished answer loaded from a saved state instead of reading them again; `null` when it read them. */
    const resumedTokens = $derived.by((): number | null => {
        const message = chat.state.messages.findLast((candidate) => candidate.role === "assistant" && candidate.stats != null);
        return message?.stats?.resumedTokens ?? null;
    });

    const storedEvicted = $derived(
        (shown?.stats?.samples ?? []).reduce((all, sample) => mergeRanges(all, sample.evicted ?? []), [] as number[])
    );

    const remembered = $derived.by((): RememberedView | null => {
        void version;
        const reading = current;
        if (reading == null) return null;
        const live = shown != null && liveOf(shown) != null;
        const {tokensSeen, step} = reading.sample;
        return {
            messageId: reading.messageId,
            tokensSeen,
            answerStart: Math.max(0, tokensSeen - step),
            evicted: live ? liveEvicted : storedEvicted,
            live: reading.live,
            policy: reading.compression?.policy ?? null,
            scores: live ? liveScores : (shown?.stats?.tokens ?? null),
            rounds: live ? [] : (shown?.stats?.rounds ?? [])
        };
    });

    const points = $derived.by((): MemoryPoint[] => {
        void version;
        const all: MemoryPoint[] = [];
        for (const message of chat.state.messages) {
            if (message.role !== "assistant") continue;
            if (liveOf(message)) all.push(...series.points);
            else for (const sample of message.stats?.samples ?? []) all.push(toPoint(sample));
        }
        return decimate(all, maxPoints);
    });

    const offMemory = bridge.on("chat:memory", onMemory);
    const offRebuild = bridge.on("chat:rebuild", onRebuild);

    return {
        /** The reading the gauge shows: live while an answer streams, else the last answer's last stored sample. */
        get current() {
            return current;
        },
        /** Which tokens the shown answer's cache still holds, live (throttled) while it streams. */
        get remembered() {
            return remembered;
        },
        /** KV memory against tokens over the whole conversation, thinned to at most `maxPoints`. */
        get points() {
            return points;
        },
        /** The conversation's saved KV state (bytes on disk, and a Full cache's bytes for the same tokens), or `null`. */
        get savedState() {
            return savedState;
        },
        /** Tokens the latest answer loaded from disk instead of reading the history again, or `null`. */
        get resumedTokens() {
            return resumedTokens;
        },
        /** The latest answer's KV state is held by the engine, not written yet (written when the conversation is left). */
        get statePending() {
            return statePending;
        },
        /** Grows with every published update: the charts redraw when it changes. */
        get version() {
            return version;
        },
        /** Progress (0..1) of reading a long prompt into the open conversation's context and why, or `null`. */
        get rebuild(): {progress: number; reason: ReadReason} | null {
            return rebuild.conversationId === chat.state.conversationId && rebuild.progress != null
                ? {progress: rebuild.progress, reason: rebuild.reason}
                : null;
        },
        /**
         * What a finished answer evicted of its own positions, and where the answer starts (`tokensSeen - step` of its last
         * sample), for "Show what was forgotten"; `null` while it streams or without samples.
         */
        forgottenOf(message: MessageDto): {answerStart: number; evicted: number[]} | null {
            const last = lastSample(message.stats);
            if (message.status === "streaming" || last == null) return null;
            const evicted = (message.stats?.samples ?? []).reduce((all, sample) => mergeRanges(all, sample.evicted ?? []), [] as number[]);
            return {answerStart: Math.max(0, last.tokensSeen - last.step), evicted};
        },
        /** The reading that sums up `message`: live while it streams, then its stored last sample. */
        footprintOf(message: MessageDto): KvSample | null {
            return liveOf(message) ?? lastSample(message.stats);
        },
        dispose(): void {
            offMemory();
            offRebuild();
            if (timer != null) clearTimeout(timer);
            if (rebuildTimer != null) clearTimeout(rebuildTimer);
        }
    };
}
