import {AppError} from "../../AppError.js";
import type {CalibrateRetentionOptions} from "./types.js";
import type {CalibrationSettings} from "./writeCalibratedSidecar.js";
import type {WrittenText} from "./writtenTexts.js";

/**
 * A calibration job's settings, its defaults filled in by prompt set: the task models think through 48 of their task's
 * problems, up to 3,000 tokens on the demo task's; written texts (`written`: the conversations and traces sets, whose
 * `texts` are given) are each read, about one in six held out (1 to 8, at least one read), up to 4,096 tokens or the
 * model's training context. Refuses texts given to another set, fewer than 2 texts, and read thresholds or horizon
 * weights out of range.
 */
export function jobSettings(options: CalibrateRetentionOptions): {settings: CalibrationSettings; written: boolean; texts: WrittenText[]} {
    const task = options.promptSet === "demo" || options.promptSet === "merge" || options.promptSet === "multi";
    const written = options.promptSet === "conversations" || options.promptSet === "traces";
    if (written !== (options.texts != null))
        throw new RangeError("texts are given with the conversations and traces sets, and with them only");
    const texts = options.texts ?? [];
    if (written && texts.length < 2)
        throw new AppError("BAD_REQUEST", `Calibration from written text needs at least 2 texts (one held out), got ${texts.length}`);
    const validationDefault = written ? Math.min(8, Math.max(1, Math.round(texts.length / 6))) : options.promptSet === "english" ? 4 : 8;
    const validationPrompts = Math.min(options.validationPrompts ?? validationDefault, written ? texts.length - 1 : Infinity);
    // the key order is the work folder's key: a resumed job finds its folder by it
    const settings = {
        promptSet: options.promptSet,
        prompts: options.prompts ?? (written ? texts.length - validationPrompts : task ? 48 : 32),
        validationPrompts,
        tokens: options.tokens ?? 65536,
        maxTokens:
            options.maxTokens ?? (written ? Math.min(4096, options.model.trainContextSize) : options.promptSet === "demo" ? 3000 : 2048),
        seed: options.seed ?? 0,
        hidden: options.hidden ?? 64,
        epochs: options.epochs ?? 8,
        horizonWeights: options.horizonWeights ?? [1, 0.5],
        readThresholds: options.readThresholds ?? [0.5, 0.25]
    };
    if (settings.readThresholds.length === 0 || settings.readThresholds.some((t) => !(t > 0 && t <= 1)))
        throw new RangeError("the read thresholds must be one or more shares within (0, 1]");
    if (settings.horizonWeights.length === 0 || settings.horizonWeights.some((w) => !(w >= 0 && w <= 4)))
        throw new RangeError("the horizon weights must be one or more numbers from 0 to 4");
    return {settings, written, texts};
}
