import {z} from "zod";
import type {Req, RequestChannel} from "../../preload/contract.js";
import {appSettingsSchema, conversationSettingsSchema} from "../services/schemas.js";

const id = z.string().min(1).max(200);
const none = z.undefined().or(z.null()).transform(() => undefined);

/** One schema per request channel: every payload from a renderer is parsed before a handler sees it. */
export const requestSchemas = {
    "app:status": none,
    "settings:get": none,
    "settings:update": appSettingsSchema.partial().strict(),
    "models:list": none,
    "models:add": z.object({path: z.string().min(1).max(4096)}).strict(),
    "models:pick": none,
    "models:remove": z.object({id}).strict(),
    "models:load": z.object({id}).strict(),
    "conversations:list": z.object({query: z.string().max(200).optional()}).strict(),
    "conversations:create": z.object({title: z.string().max(500).optional()}).strict(),
    "conversations:rename": z.object({id, title: z.string().max(500)}).strict(),
    "conversations:delete": z.object({id}).strict(),
    "conversations:get": z.object({id}).strict(),
    "conversations:updateSettings": z.object({id, settings: conversationSettingsSchema.partial().strict()}).strict(),
    "chat:send": z.object({conversationId: id, text: z.string().min(1).max(200_000)}).strict(),
    "chat:regenerate": z.object({conversationId: id}).strict(),
    "chat:stop": z.object({conversationId: id}).strict(),
    "shell:openExternal": z.object({url: z.url({protocol: /^https?$/})}).strict()
} satisfies {[C in RequestChannel]: z.ZodType<Req<C>, unknown>};
