import {describe, expect, it} from "vitest";
import {requestChannels} from "../../../preload/contract.js";
import {AppError} from "../../../main/AppError.js";
import {createDispatch} from "../../../main/ipc/dispatch.js";
import {createHandlers, type Handlers} from "../../../main/ipc/handlers.js";
import {requestSchemas} from "../../../main/ipc/schemas.js";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {FakeEngine} from "./FakeEngine.js";

function dispatcher() {
    const services = new AppServices(new AppDatabase(":memory:"), new FakeEngine().asEngine(), () => {}, {
        version: "t",
        modelsDir: "/tmp/ponder-test-models"
    });
    return createDispatch(createHandlers(services, {openExternal: async () => {}, pickModelFile: async () => null}));
}

describe("IPC dispatch", () => {
    it("has a schema and a handler for every channel of the contract", () => {
        const handlers = createHandlers({} as AppServices, {openExternal: async () => {}, pickModelFile: async () => null});
        expect(Object.keys(handlers).sort()).toEqual([...requestChannels].sort());
        expect(Object.keys(requestSchemas).sort()).toEqual([...requestChannels].sort());
    });

    it("refuses unknown channels and malformed payloads as data", async () => {
        const dispatch = dispatcher();
        expect(await dispatch("fs:readFile", {})).toMatchObject({ok: false, error: {code: "BAD_REQUEST"}});
        expect(await dispatch(42, {})).toMatchObject({ok: false, error: {code: "BAD_REQUEST"}});
        expect(await dispatch("conversations:rename", {id: "x"})).toMatchObject({ok: false, error: {code: "BAD_REQUEST"}});
        expect(await dispatch("conversations:get", {id: "x", extra: true})).toMatchObject({ok: false, error: {code: "BAD_REQUEST"}});
        expect(await dispatch("chat:send", {conversationId: "x", text: ""})).toMatchObject({ok: false, error: {code: "BAD_REQUEST"}});
        expect(await dispatch("conversations:updateSettings", {id: "x", settings: {temperature: "hot"}})).toMatchObject({ok: false});
        expect(await dispatch("shell:openExternal", {url: "file:///etc/passwd"})).toMatchObject({ok: false, error: {code: "BAD_REQUEST"}});
        expect(await dispatch("shell:openExternal", {url: "javascript:alert(1)"})).toMatchObject({ok: false, error: {code: "BAD_REQUEST"}});
        expect(await dispatch("settings:update", {theme: "neon"})).toMatchObject({ok: false, error: {code: "BAD_REQUEST"}});
    });

    it("returns values and turns thrown errors into coded errors", async () => {
        const dispatch = dispatcher();
        const created = await dispatch("conversations:create", {title: "hello"});
        expect(created).toMatchObject({ok: true, value: {title: "hello"}});
        expect(await dispatch("conversations:get", {id: "missing"})).toEqual({
            ok: false,
            error: {code: "NOT_FOUND", message: "Conversation missing does not exist"}
        });
        expect(await dispatch("models:add", {path: "/nope/model.gguf"})).toMatchObject({ok: false, error: {code: "MODEL_INVALID"}});
        expect(await dispatch("app:status", undefined)).toMatchObject({ok: true, value: {version: "t"}});
    });

    it("hides nothing of an unexpected error but codes it INTERNAL", async () => {
        const handlers = {
            "app:status": () => {
                throw new TypeError("boom");
            }
        } as unknown as Handlers;
        const logged: string[] = [];
        const dispatch = createDispatch(handlers, (message) => logged.push(message));
        expect(await dispatch("app:status", undefined)).toEqual({ok: false, error: {code: "INTERNAL", message: "boom"}});
        expect(logged).toHaveLength(1);
        void AppError;
    });
});
