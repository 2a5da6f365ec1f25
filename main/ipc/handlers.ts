import type {Req, RequestChannel, Res} from "../../preload/contract.js";
import type {AppServices} from "../services/AppServices.js";
import {exportConversation} from "../services/exportConversation.js";

/** What only the host (Electron, or the headless server) can do. */
export type Platform = {
    /** Opens an http(s) link in the user's browser. */
    openExternal(url: string): Promise<void>;
    /** Asks the user for a GGUF file; `null` when cancelled or when there is no dialog. */
    pickModelFile(): Promise<string | null>;
    /** Asks the user for a `trimkv_weights.pth` (with the `config.json` beside it, when there); `null` when cancelled or when there is no dialog. Defaults to none. */
    pickTrimkvFiles?(): Promise<{weights: string; config: string | null} | null>;
};

export type Handlers = {[C in RequestChannel]: (payload: Req<C>) => Res<C> | Promise<Res<C>>};

/** The handler table: one entry per request channel, checked for exhaustiveness by `satisfies`. */
export function createHandlers(services: AppServices, platform: Platform) {
    return {
        "app:status": () => services.status(),
        "demo:sample": () => services.demoSample(),
        "settings:get": () => services.settings.get(),
        "settings:update": (patch) => services.settings.update(patch),
        "states:usage": () => services.savedStates(),
        "states:clear": () => services.clearSavedStates(),
        "models:list": () => services.models.list(),
        "models:add": ({path}) => services.models.add(path),
        "models:pick": () => platform.pickModelFile(),
        "models:remove": ({id}) => services.models.remove(id),
        "models:load": ({id}) => services.models.load(id),
        "models:details": ({id}) => services.modelDetails(id),
        "models:setGpuLayers": ({id, gpuLayers}) => services.models.setGpuLayers(id, gpuLayers),
        "models:download": ({uri}) => services.downloads.start(uri),
        "models:cancelDownload": ({downloadId}) => services.downloads.cancel(downloadId),
        "models:downloads": () => services.downloads.list(),
        "models:pickTrimkv": () => platform.pickTrimkvFiles?.() ?? null,
        "models:convertTrimkv": ({id, weights, config}) => services.models.convertTrimkv(id, weights, config),
        "models:getTrimkvGates": ({id, repo}) => services.downloads.startGates(id, repo),
        "models:calibrate": ({id, source}) => services.calibration.start(id, source),
        "models:calibrationConversations": ({id}) => services.calibration.conversationsOf(id),
        "models:calibrateCancel": () => services.calibration.cancel(),
        "models:calibrationStatus": () => services.calibration.status,
        "compression:estimate": ({modelId, compression}) => services.compression.estimate(compression, modelId),
        "compression:newConversation": () => services.newConversationCompression(),
        "generation:capabilities": () => services.models.capabilities(),
        "conversations:list": ({query}) => services.conversations.list(query),
        "search:messages": ({query}) => services.conversations.searchMessages(query),
        "conversations:create": ({title}) => services.createConversation(title),
        "conversations:rename": ({id, title}) => services.conversations.rename(id, title),
        "conversations:delete": ({id}) => services.deleteConversation(id),
        "conversations:get": ({id}) => services.openConversation(id),
        "conversations:updateSettings": ({id, settings}) => services.conversations.updateSettings(id, settings),
        "conversations:export": ({id, format}) => exportConversation(services.conversations.get(id), format),
        "chat:countTokens": ({conversationId, text}) => services.tokens.count(conversationId, text),
        "chat:send": ({conversationId, text}) => services.chat.send(conversationId, text),
        "chat:regenerate": ({conversationId, compareFull}) => services.chat.regenerate(conversationId, {compareFull}),
        "chat:continue": ({conversationId}) => services.chat.continue(conversationId),
        "chat:edit": ({conversationId, messageId, text}) => services.chat.edit(conversationId, messageId, text),
        "conversations:switchBranch": ({id, messageId}) => services.switchBranch(id, messageId),
        "conversations:deleteMessage": ({id, messageId}) => services.deleteMessage(id, messageId),
        "conversations:fork": ({id, messageId}) => services.conversations.fork(id, messageId),
        "conversations:import": ({content}) => services.conversations.importFile(content),
        "chat:stop": ({conversationId}) => services.chat.stop(conversationId),
        "shell:openExternal": ({url}) => platform.openExternal(url),
        "server:get": () => services.server.get(),
        "server:update": (patch) => services.server.update(patch),
        "server:generateKey": () => services.server.generateKey(),
        "server:clearKey": () => services.server.clearKey(),
        "engine:builds": () => services.engineBuilds.get(),
        "engine:setBuild": ({build}) => services.engineBuilds.set(build),
        "rpc:list": () => services.rpcServers.get(),
        "rpc:add": ({endpoint}) => services.rpcServers.add(endpoint),
        "rpc:remove": ({endpoint}) => services.rpcServers.remove(endpoint),
        "rpc:setEnabled": ({endpoint, enabled}) => services.rpcServers.setEnabled(endpoint, enabled),
        "rpc:check": ({endpoint}) => services.rpcServers.check(endpoint)
    } satisfies Handlers;
}
