import {z} from "zod";
import type {AppSettings, ConversationSettings} from "../../preload/contract.js";

export const conversationSettingsSchema = z.object({
    systemPrompt: z.string().max(20_000),
    temperature: z.number().min(0).max(2),
    maxTokens: z.number().int().min(1).max(131_072)
}) satisfies z.ZodType<ConversationSettings>;

export const defaultConversationSettings: ConversationSettings = {
    systemPrompt: "",
    temperature: 0.6,
    maxTokens: 4096
};

export const appSettingsSchema = z.object({
    theme: z.enum(["system", "light", "dark"]),
    defaultModelId: z.string().max(200).nullable(),
    defaultConversationSettings: conversationSettingsSchema
}) satisfies z.ZodType<AppSettings>;

export const defaultAppSettings: AppSettings = {
    theme: "system",
    defaultModelId: null,
    defaultConversationSettings
};
