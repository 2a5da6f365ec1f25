import type {LlamaModel, Token} from "node-llama-cpp";
import type {CompressionSettings} from "../../preload/contract.js";
import {KvController} from "../../main/engine/pruning/KvController.js";
import {NativeKv} from "../../main/engine/native/NativeKv.js";
import {gateSequenceDecodes} from "../../main/engine/native/ponderAddon.js";

/** The decode runs' fixed 32-token prompt: ids spread over 10 to `span` + 9, within a small vocabulary. */
export const fixedPrompt = (span = 500): Token[] => Array.from({length: 32}, (_, i) => (((i * 31) % span) + 10) as Token);

export type DecodePoint = {tokens: number; tokensPerSecond: number; liveBytes: number; allocatedBytes: number; fullBytes: number};

/** What the engine computed beside K and V during a run: the controller turns on what the policy reads, as in the app. */
export type DecodeReads = {
    /** Query rows scored per ubatch (0: scoring off). */
    scoringRows: number;
    /** Whether TRIM-KV's retention gates ran. */
    retention: boolean;
    /** Whether the cells' value L1 norms were written (LAVa). */
    valueNorms: boolean;
};

/**
 * Greedy decoding of `length` tokens after `prompt` in a context of `cells` cells, the policy pruning as it
 * goes (each round before the decode it is due at, as in the app). Every `window` tokens: throughput over the window
 * and KV memory. Decoding goes on past an end-of-generation token, so a model that ends its turns (the many-task
 * model) decodes the whole length as one that does not.
 */
export async function decodeRun(
    model: LlamaModel,
    options: {
        prompt: Token[];
        length: number;
        cells: number;
        compression: CompressionSettings;
        window: number;
        threads?: number;
        flashAttention?: boolean;
        /** Called after each window (for progress lines on long runs). */
        onPoint?: (point: DecodePoint) => void;
        /** The model's retention gate file, for a policy that reads the gates (TRIM-KV). */
        retentionGates?: string | null;
    }
): Promise<{
    points: DecodePoint[];
    tokensPerSecond: number;
    scoringMs: number;
    /** Per-head cells: the part of `scoringMs` spent moving heads and freeing cells; absent on shared cells. */
    movingMs?: number;
    pruneRounds: number;
    forcedDrops: number;
    reads: DecodeReads;
}> {
    const context = await model.createContext({
        contextSize: options.cells,
        threads: options.threads ?? 0,
        sequences: 1,
        flashAttention: options.flashAttention ?? false
    });
    const kv = new NativeKv(context);
    try {
        if (options.compression.policy !== "full") kv.setPositionLimit(1 << 22);
        const sequence = context.getSequence();
        const controller = new KvController({
            kv,
            sequenceId: 0,
            compression: options.compression,
            cells: options.cells,
            tokensSeen: () => sequence.nextTokenIndex,
            now: () => performance.now(),
            retentionGates: options.retentionGates
        });
        await controller.start();
        const reads: DecodeReads = {scoringRows: controller.scoringRows, retention: kv.retentionGates != null, valueNorms: kv.valueNormsOn};
        gateSequenceDecodes(sequence, (count, first) => controller.beforeDecode(count, first));
        controller.beginAnswer();
        const points: DecodePoint[] = [];
        let count = 0;
        const started = performance.now();
        let windowStart = started;
        for await (const _token of sequence.evaluate(options.prompt, {temperature: 0, yieldEogToken: true})) {
            void _token;
            count++;
            controller.onTokens(1);
            if (count % options.window === 0) {
                const now = performance.now();
                const sample = await controller.sample(0);
                const point: DecodePoint = {
                    tokens: count,
                    tokensPerSecond: options.window / ((now - windowStart) / 1000),
                    liveBytes: sample.liveBytes,
                    allocatedBytes: sample.allocatedBytes,
                    fullBytes: sample.fullBytes
                };
                points.push(point);
                options.onPoint?.(point);
                windowStart = performance.now();
            }
            if (count >= options.length) break;
        }
        const seconds = (performance.now() - started) / 1000;
        const last = await controller.sample(0);
        return {
            points,
            tokensPerSecond: count / seconds,
            scoringMs: last.scoringMs,
            ...(last.movingMs != null ? {movingMs: last.movingMs} : {}),
            pruneRounds: last.pruneRounds,
            forcedDrops: last.forcedDrops,
            reads
        };
    } finally {
        await kv.dispose();
        await context.dispose();
    }
}
