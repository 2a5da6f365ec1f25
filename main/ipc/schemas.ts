import {z} from "zod";
import type {AppSettings, Req, RequestChannel} from "../../preload/contract.js";
import {engineBuildChoiceSchema} from "../services/EngineBuildService.js";
import {serverSettingsSchema} from "../services/ServerService.js";
import {
    appSettingsSchema,
    compressionSettingsFields,
    compressionSettingsSchema,
    conversationSettingsSchema,
    gpuLayersSchema
} from "../services/schemas.js";
import {maxImportBytes} from "../services/importConversation.js";
import {maxCountChars} from "../services/TokenCountService.js";

const id = z.string().min(1).max(200);
const none = z
    .undefined()
    .or(z.null())
    .transform((): void => undefined);
/** "host:port", checked in words by the service (parseRpcEndpoint); here only its shape and size. */
const rpcEndpointSchema = z.string().min(1).max(300);
const rpcEndpointRequest = z.object({endpoint: rpcEndpointSchema}).strict();

/** One schema per request channel: every payload from a renderer is parsed before a handler sees it. */
export const requestSchemas = {
    "app:status": none,
    "demo:sample": none,
    "settings:get": none,
    "settings:update": appSettingsSchema.partial().strict() as z.ZodType<Partial<AppSettings>>,
    "states:usage": none,
    "states:clear": none,
    "models:list": none,
    "models:add": z.object({path: z.string().min(1).max(4096)}).strict(),
    "models:pick": none,
    "models:remove": z.object({id}).strict(),
    "models:load": z.object({id}).strict(),
    "models:details": z.object({id}).strict(),
    "models:setGpuLayers": z.object({id, gpuLayers: gpuLayersSchema}).strict(),
    "models:download": z.object({uri: z.string().min(1).max(4096)}).strict(),
    "models:cancelDownload": z.object({downloadId: id}).strict(),
    "models:downloads": none,
    "models:pickTrimkv": none,
    "models:convertTrimkv": z.object({id, weights: z.string().min(1).max(4096), config: z.string().min(1).max(4096).optional()}).strict(),
    "models:getTrimkvGates": z.object({id, repo: z.string().min(1).max(200)}).strict(),
    "models:calibrate": z.object({id, source: z.enum(["thinking", "conversations"]).optional()}).strict(),
    "models:calibrationConversations": z.object({id}).strict(),
    "models:calibrateCancel": none,
    "models:calibrationStatus": none,
    "compression:estimate": z.object({modelId: id.optional(), compression: compressionSettingsSchema}).strict(),
    "compression:newConversation": none,
    "generation:capabilities": none,
    "conversations:list": z.object({query: z.string().max(200).optional()}).strict(),
    "search:messages": z.object({query: z.string().max(200, "A search is at most 200 characters")}).strict(),
    "conversations:create": z.object({title: z.string().max(500).optional()}).strict(),
    "conversations:rename": z.object({id, title: z.string().max(500)}).strict(),
    "conversations:delete": z.object({id}).strict(),
    "conversations:get": z.object({id}).strict(),
    "conversations:updateSettings": z
        .object({
            id,
            settings: conversationSettingsSchema.extend({compression: compressionSettingsFields.partial().strict()}).partial().strict()
        })
        .strict() as z.ZodType<Req<"conversations:updateSettings">>,
    "conversations:export": z.object({id, format: z.enum(["markdown", "json"])}).strict(),
    "chat:countTokens": z
        .object({
            conversationId: id.optional(),
            text: z.string().max(maxCountChars, "A text to count is at most 4 MiB (4,194,304 characters)")
        })
        .strict(),
    "chat:send": z.object({conversationId: id, text: z.string().min(1).max(200_000)}).strict(),
    "chat:regenerate": z.object({conversationId: id, compareFull: z.boolean().optional()}).strict(),
    "chat:continue": z.object({conversationId: id}).strict(),
    "chat:edit": z.object({conversationId: id, messageId: id, text: z.string().min(1).max(200_000)}).strict(),
    "conversations:switchBranch": z.object({id, messageId: id}).strict(),
    "conversations:deleteMessage": z.object({id, messageId: id}).strict(),
    "conversations:fork": z.object({id, messageId: id}).strict(),
    "conversations:import": z.object({content: z.string().max(maxImportBytes)}).strict(),
    "chat:stop": z.object({conversationId: id}).strict(),
    "shell:openExternal": z.object({url: z.url({protocol: /^https?$/})}).strict(),
    "server:get": none,
    "server:update": serverSettingsSchema.partial().strict() as z.ZodType<Req<"server:update">>,
    "server:generateKey": none,
    "server:clearKey": none,
    "engine:builds": none,
    "engine:setBuild": z.object({build: engineBuildChoiceSchema}).strict(),
    "rpc:list": none,
    "rpc:add": rpcEndpointRequest,
    "rpc:remove": rpcEndpointRequest,
    "rpc:setEnabled": z.object({endpoint: rpcEndpointSchema, enabled: z.boolean()}).strict(),
    "rpc:check": rpcEndpointRequest
} satisfies {[C in RequestChannel]: z.ZodType<Req<C>, unknown>};
