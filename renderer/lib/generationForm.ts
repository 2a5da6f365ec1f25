import {generationSettingKeys, type ConversationSettings, type SamplingValues} from "../../preload/contract.js";

export type GenerationSettings = Pick<ConversationSettings, (typeof generationSettingKeys)[number]>;

/**
 * The generation settings of a conversation as edited: numbers as typed (`null` when the field is empty; for the seed
 * and the thinking budget an empty field means none).
 */
export type GenerationForm = {
    systemPrompt: string;
    temperature: number | null;
    topP: number | null;
    topK: number | null;
    minP: number | null;
    repeatPenalty: number | null;
    maxTokens: number | null;
    seed: number | null;
    thinking: boolean;
    thinkingBudget: number | null;
};

// The backend's limits (main/services/schemas.ts), checked here first so a mistake is shown at the field.
const generationLimits = {
    systemPromptChars: 20_000,
    temperature: [0, 2],
    topP: [0, 1],
    topK: [0, 1000],
    minP: [0, 1],
    repeatPenalty: [1, 2],
    maxTokens: [1, 131_072],
    seed: [0, 4_294_967_295],
    thinkingBudget: [1, 131_072]
} as const;

export const samplingKeys = ["temperature", "topP", "topK", "minP", "repeatPenalty"] as const satisfies readonly (keyof SamplingValues)[];

export function toGenerationForm(settings: GenerationSettings): GenerationForm {
    return Object.fromEntries(generationSettingKeys.map((key) => [key, settings[key]])) as GenerationForm;
}

const inRange = (value: number | null, [min, max]: readonly [number, number]) =>
    value != null && Number.isFinite(value) && value >= min && value <= max;
const whole = (value: number | null, range: readonly [number, number]) => inRange(value, range) && Number.isInteger(value);

/** Field -> what is wrong with it; empty when the form can be applied. */
export function validateGenerationForm(form: GenerationForm): Partial<Record<keyof GenerationForm, string>> {
    const errors: Partial<Record<keyof GenerationForm, string>> = {};
    const limits = generationLimits;
    if (form.systemPrompt.length > limits.systemPromptChars)
        errors.systemPrompt = `The system prompt is ${form.systemPrompt.length.toLocaleString("en")} characters; at most ${limits.systemPromptChars.toLocaleString("en")}.`;
    if (!inRange(form.temperature, limits.temperature))
        errors.temperature = `Temperature must be between 0 and 2 (0 picks the likeliest token every time).`;
    if (!inRange(form.topP, limits.topP) || form.topP === 0) errors.topP = "Top-p must be above 0 and at most 1 (1 is off).";
    if (!whole(form.topK, limits.topK)) errors.topK = "Top-k must be a whole number from 0 (off) to 1,000.";
    if (!inRange(form.minP, limits.minP)) errors.minP = "Min-p must be between 0 (off) and 1.";
    if (!inRange(form.repeatPenalty, limits.repeatPenalty)) errors.repeatPenalty = "Repeat penalty must be between 1 (off) and 2.";
    if (!whole(form.maxTokens, limits.maxTokens))
        errors.maxTokens = `Max tokens must be a whole number from 1 to ${limits.maxTokens[1].toLocaleString("en")}.`;
    if (form.seed != null && !whole(form.seed, limits.seed))
        errors.seed = "The seed must be a whole number from 0 to 4,294,967,295, or empty for a new one each time.";
    if (form.thinkingBudget != null && !whole(form.thinkingBudget, limits.thinkingBudget))
        errors.thinkingBudget = `The thinking budget must be a whole number of tokens from 1 to ${limits.thinkingBudget[1].toLocaleString("en")}, or empty for no limit.`;
    return errors;
}

/** The form as settings; call only when {@link validateGenerationForm} finds nothing. */
export function toGenerationSettings(form: GenerationForm): GenerationSettings {
    return {...form} as GenerationSettings;
}
