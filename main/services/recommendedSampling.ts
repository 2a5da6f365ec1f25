import type {RecommendedSampling, SamplingValues} from "../../preload/contract.js";
import type {ModelInspection} from "../engine/EngineApi.js";

/** Values a model card leaves unsaid: no top-k, no min-p, no repeat penalty. */
const neutral: SamplingValues = {temperature: 0.6, topP: 0.95, topK: 0, minP: 0, repeatPenalty: 1};

/** Known reasoning families and their model cards' recommendations. */
const families: Array<{
    pattern: RegExp;
    architecture?: string;
    label: string;
    thinking: SamplingValues;
    nonThinking: SamplingValues | null;
}> = [
    {
        // "For thinking mode, use Temperature=0.6, TopP=0.95, TopK=20, and MinP=0 (...) DO NOT use greedy decoding";
        // "for non-thinking mode, we suggest Temperature=0.7, TopP=0.8, TopK=20, and MinP=0".
        pattern: /qwen[-_ ]?3(?![0-9])/i,
        architecture: "qwen3",
        label: "Qwen3 model card",
        thinking: {temperature: 0.6, topP: 0.95, topK: 20, minP: 0, repeatPenalty: 1},
        nonThinking: {temperature: 0.7, topP: 0.8, topK: 20, minP: 0, repeatPenalty: 1}
    },
    {
        // "Set the temperature within the range of 0.5-0.7 (0.6 is recommended)"; evaluated with top-p 0.95.
        pattern: /r1[-_ ]?distill|deepseek[-_ ]?r1/i,
        label: "DeepSeek-R1 model card",
        thinking: {...neutral, temperature: 0.6, topP: 0.95},
        nonThinking: null
    },
    {
        // "Use Temperature=0.6, TopP=0.95, MinP=0 instead of Greedy decoding"; "TopK between 20 and 40".
        pattern: /qwq/i,
        label: "QwQ model card",
        thinking: {temperature: 0.6, topP: 0.95, topK: 40, minP: 0, repeatPenalty: 1},
        nonThinking: null
    }
];

/**
 * What the model's publisher recommends: the GGUF's own `general.sampling.*` when it declares any (over neutral
 * values), else the model card of a known family (by name, then architecture); `null` for other models.
 */
export function recommendedSampling(
    model: Pick<ModelInspection, "name" | "path" | "architecture" | "declaredSampling">
): RecommendedSampling | null {
    const declared = model.declaredSampling;
    if (declared != null && Object.keys(declared).length > 0)
        return {source: "gguf", label: "the GGUF file", thinking: {...neutral, ...declared}, nonThinking: null};
    const names = `${model.name} ${model.path.split(/[\\/]/).at(-1) ?? ""}`;
    const family =
        families.find((known) => known.pattern.test(names)) ??
        families.find((known) => known.architecture != null && known.architecture === model.architecture);
    if (family == null) return null;
    return {
        source: "family",
        label: family.label,
        thinking: {...family.thinking},
        nonThinking: family.nonThinking && {...family.nonThinking}
    };
}
