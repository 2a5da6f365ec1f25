import type {
    ErrorCode,
    EventChannel,
    Events,
    KvSample,
    MessageDto,
    PonderApi,
    Req,
    RequestChannel,
    Res,
    Result,
    ConversationSettings
} from "../../../preload/contract.js";

type Handler<C extends RequestChannel> = (payload: Req<C>) => Result<Res<C>> | Promise<Result<Res<C>>>;
type AnyHandler = (payload: unknown) => Result<unknown> | Promise<Result<unknown>>;

/** A `PonderApi` whose requests are answered by per-channel handlers and whose events the test emits. */
export function createFakeBridge() {
    const handlers = new Map<RequestChannel, AnyHandler>();
    const listeners = new Map<EventChannel, Set<(payload: never) => void>>();
    const calls: {channel: RequestChannel; payload: unknown}[] = [];

    const api: PonderApi = {
        async invoke<C extends RequestChannel>(channel: C, payload: Req<C>): Promise<Result<Res<C>>> {
            calls.push({channel, payload});
            const handler = handlers.get(channel) as unknown as Handler<C> | undefined;
            if (!handler) return {ok: false, error: {code: "INTERNAL", message: `No fake handler for ${channel}`}};
            return handler(payload);
        },
        on<C extends EventChannel>(channel: C, listener: (payload: Events[C]) => void): () => void {
            const set = listeners.get(channel) ?? new Set();
            listeners.set(channel, set);
            set.add(listener as (payload: never) => void);
            return () => void set.delete(listener as (payload: never) => void);
        }
    };

    return {
        api,
        calls,
        handle<C extends RequestChannel>(channel: C, handler: Handler<C>): void {
            handlers.set(channel, handler as unknown as AnyHandler);
        },
        /** Answers `channel` with `value`. */
        reply<C extends RequestChannel>(channel: C, value: Res<C>): void {
            handlers.set(channel, () => ({ok: true, value}));
        },
        fail(channel: RequestChannel, code: ErrorCode, message: string): void {
            handlers.set(channel, () => ({ok: false, error: {code, message}}));
        },
        emit<C extends EventChannel>(channel: C, payload: Events[C]): void {
            for (const listener of listeners.get(channel) ?? []) (listener as (payload: Events[C]) => void)(payload);
        },
        listenerCount(channel: EventChannel): number {
            return listeners.get(channel)?.size ?? 0;
        }
    };
}

export function message(overrides: Partial<MessageDto> & Pick<MessageDto, "id" | "role">): MessageDto {
    return {
        conversationId: "c1",
        text: "",
        thinking: "",
        status: "complete",
        promptTokens: 0,
        thinkingTokens: 0,
        answerTokens: 0,
        thinkingMs: 0,
        totalMs: 0,
        firstTokenMs: null,
        siblingIds: [overrides.id],
        error: null,
        stats: null,
        cut: null,
        compression: null,
        createdAt: 0,
        ...overrides
    };
}

export function conversationSettings(overrides: Partial<ConversationSettings> = {}): ConversationSettings {
    return {
        systemPrompt: "",
        temperature: 0.6,
        topP: 0.95,
        topK: 20,
        minP: 0,
        repeatPenalty: 1,
        maxTokens: 4096,
        seed: null,
        thinking: true,
        thinkingBudget: null,
        compression: {
            policy: "full",
            budget: {kind: "auto"},
            kvType: "f16",
            kvTypeV: "f16",
            flashAttention: false,
            combine: "aggregate",
            pruneEvery: 16,
            params: {
                streamingllm: {sinks: 4},
                h2o: {heavyRatio: 0.5},
                lethe: {sparseRatio: 400, recentRatio: 0.3, segments: 8, sinks: 4, gamma: 0.95, initialEvictRatio: 0.5, keepInput: 0.5},
                refreekv: {threshold: 0.01, firstM: 4, wholeLayers: 2, mode: "once"},
                leankv: {alpha: 1.2, window: 64},
                lava: {window: 32, kernel: 7}
            }
        },
        ...overrides
    };
}

/** A KV reading: 1000 tokens seen, 380 kept of 512 allocated, 32 KiB per cell. */
export function kvSample(overrides: Partial<KvSample> = {}): KvSample {
    return {
        step: 1,
        tokensSeen: 1000,
        cellsLive: 380,
        cellsAllocated: 512,
        bytesPerCell: 32 * 1024,
        allocatedBytes: 512 * 32 * 1024,
        liveBytes: 380 * 32 * 1024,
        fullBytes: 1000 * 32 * 1024,
        pruneRounds: 3,
        tokensEvicted: 620,
        forcedDrops: 0,
        sparsityPerLayer: [0.2, 0.6],
        scoringMs: 0.3,
        tokensPerSecond: 40,
        ...overrides
    };
}
