import {gguf, type GgufValue} from "../gguf/writeGguf.js";
import {writeRetentionSidecar} from "../retention/writeRetentionSidecar.js";
import type {PromptSet} from "./prompts.js";
import type {TrainedGates} from "./trainGates.js";
import type {CalibrationDataset, ValidationReport} from "./types.js";

// A calibration's gates as a sidecar beside the model, with their provenance (`ponder.retention.calibration.*`).

/** The settings of a calibration job: what makes its work folder's key. */
export type CalibrationSettings = {
    promptSet: PromptSet;
    prompts: number;
    validationPrompts: number;
    tokens: number;
    maxTokens: number;
    seed: number;
    hidden: number;
    epochs: number;
    horizonWeights: number[];
    readThresholds: number[];
};

/** The `ponder.retention.calibration.*` keys: what the gates were made from and how they validated. */
export function calibrationProvenance(
    settings: CalibrationSettings,
    prompts: number,
    data: CalibrationDataset,
    kept: {readThreshold: number; horizonWeight: number},
    seconds: number,
    validation: ValidationReport | null
): [string, GgufValue][] {
    const key = "ponder.retention.calibration.";
    const entries: [string, GgufValue][] = [
        [key + "prompt_set", gguf.string(settings.promptSet)],
        [key + "prompts", gguf.u32(prompts)],
        [key + "tokens", gguf.u32(data.tokensSeen)],
        [key + "samples", gguf.u32(data.tokens)],
        [key + "seed", gguf.u32(settings.seed)],
        [key + "read_threshold", gguf.f32(kept.readThreshold)],
        [key + "horizon_weight", gguf.f32(kept.horizonWeight)],
        [key + "seconds", gguf.u32(Math.round(seconds))],
        [key + "text_tokens_mean", gguf.u32(textLengths(data).mean)],
        [key + "text_tokens_longest", gguf.u32(textLengths(data).longest)],
        [key + "texts_cut", gguf.u32(textLengths(data).cut)],
        [key + "date", gguf.string(new Date().toISOString())]
    ];
    if (validation != null) {
        entries.push([key + "validation.prompts", gguf.u32(validation.prompts)], [key + "validation.tokens", gguf.u32(validation.tokens)]);
        for (const point of validation.points) {
            const share = String(Math.round(point.share * 100));
            entries.push(
                [`${key}validation.agreement_${share}`, gguf.f32(point.gates)],
                [`${key}validation.lethe_${share}`, gguf.f32(point.lethe)]
            );
            if (point.answers != null)
                entries.push(
                    [`${key}validation.answer_agreement_${share}`, gguf.f32(point.answers.gates)],
                    [`${key}validation.answer_lethe_${share}`, gguf.f32(point.answers.lethe)]
                );
        }
    }
    return entries;
}

/**
 * The lengths of a calibration's texts in tokens (prompt and thought): horizons learned on short texts are short, so
 * the card says how long they were, and how many a limit cut.
 */
export function textLengths(data: Pick<CalibrationDataset, "texts">): {mean: number; longest: number; cut: number} {
    const lengths = data.texts.map((text) => text.promptTokens + text.generatedTokens);
    const total = lengths.reduce((sum, n) => sum + n, 0);
    return {
        mean: lengths.length > 0 ? Math.round(total / lengths.length) : 0,
        longest: Math.max(0, ...lengths),
        cut: data.texts.filter((text) => text.stop === "limit").length
    };
}

/** The prompts of a set, in the sidecar's `source` line. */
const promptWords: Record<PromptSet, string> = {
    english: "English prompts",
    own: "prompts the model wrote",
    demo: "demo-task prompts",
    merge: "merge-task prompts",
    multi: "many-task prompts",
    file: "prompts from a file",
    conversations: "the person's conversations, read",
    traces: "a trace file, read"
};

export async function writeCalibratedSidecar(
    file: string,
    modelPath: string,
    gates: TrainedGates,
    settings: CalibrationSettings,
    extra: [string, GgufValue][]
): Promise<void> {
    await writeRetentionSidecar(file, {
        modelPath,
        layers: gates.gates,
        budget: 0,
        // fitted per (layer, KV head): they rank each head's own tokens on per-head cells under `auto` (trimKvCombine)
        reduction: "per-head",
        extra,
        source:
            `ponder calibrate: ${settings.prompts} ${promptWords[settings.promptSet]}, seed ${settings.seed}, ` +
            `${settings.tokens} tokens at most, read horizons fitted per layer and KV head, weighed by horizon (hidden ${settings.hidden}, ${settings.epochs} epochs)`
    });
}
