import type {ConversationSettings} from "./contract/conversations.js";

/** The settings of a conversation's generation: every one but its compression, which has a controller of its own. */
export const generationSettingKeys = [
    "systemPrompt",
    "temperature",
    "topP",
    "topK",
    "minP",
    "repeatPenalty",
    "maxTokens",
    "seed",
    "thinking",
    "thinkingBudget"
] as const satisfies readonly Exclude<keyof ConversationSettings, "compression">[];
