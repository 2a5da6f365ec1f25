import type {ConversationSettings} from "../../preload/contract.js";

/** The generation settings of a conversation as edited: numbers as typed (`null` when the field is empty). */
export type GenerationForm = {systemPrompt: string, temperature: number | null, maxTokens: number | null};
export type GenerationSettings = Pick<ConversationSettings, "systemPrompt" | "temperature" | "maxTokens">;

// The backend's limits (main/services/schemas.ts), checked here first so a mistake is shown at the field.
export const generationLimits = {systemPromptChars: 20_000, temperature: [0, 2], maxTokens: [1, 131_072]} as const;

export function toGenerationForm(settings: GenerationSettings): GenerationForm {
    return {systemPrompt: settings.systemPrompt, temperature: settings.temperature, maxTokens: settings.maxTokens};
}

/** Field -> what is wrong with it; empty when the form can be applied. */
export function validateGenerationForm(form: GenerationForm): Partial<Record<keyof GenerationForm, string>> {
    const errors: Partial<Record<keyof GenerationForm, string>> = {};
    const [tMin, tMax] = generationLimits.temperature;
    const [mMin, mMax] = generationLimits.maxTokens;
    if (form.systemPrompt.length > generationLimits.systemPromptChars)
        errors.systemPrompt = `The system prompt is ${form.systemPrompt.length.toLocaleString("en")} characters; at most ${generationLimits.systemPromptChars.toLocaleString("en")}.`;
    if (form.temperature == null || !Number.isFinite(form.temperature) || form.temperature < tMin || form.temperature > tMax)
        errors.temperature = `Temperature must be between ${tMin} and ${tMax} (0 picks the likeliest token every time).`;
    if (form.maxTokens == null || !Number.isInteger(form.maxTokens) || form.maxTokens < mMin || form.maxTokens > mMax)
        errors.maxTokens = `Max tokens must be a whole number from ${mMin} to ${mMax.toLocaleString("en")}.`;
    return errors;
}

/** The form as settings; call only when {@link validateGenerationForm} finds nothing. */
export function toGenerationSettings(form: GenerationForm): GenerationSettings {
    return {systemPrompt: form.systemPrompt, temperature: form.temperature!, maxTokens: form.maxTokens!};
}
