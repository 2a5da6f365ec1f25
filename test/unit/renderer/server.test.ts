import {describe, expect, test} from "vitest";
import type {ServerRequestLog, ServerStatus} from "../../../preload/contract.js";
import {checkAddress, createServer, isLoopbackHost} from "../../../renderer/state/server.svelte.js";
import {createFakeBridge} from "./fakeBridge.js";

const status = (overrides: Partial<ServerStatus> = {}): ServerStatus => ({
    settings: {
        enabled: false,
        host: "127.0.0.1",
        port: 8080,
        policy: "lethe",
        budget: {kind: "cells", cells: 4096},
        corsOrigins: [],
        maxQueued: 4
    },
    hasKey: false,
    running: false,
    url: null,
    model: "ponder-demo",
    error: null,
    ...overrides
});
const entry = (overrides: Partial<ServerRequestLog> = {}): ServerRequestLog => ({
    id: "r1",
    startedAt: 0,
    client: "127.0.0.1",
    method: "POST",
    path: "/v1/chat/completions",
    state: "running",
    httpStatus: null,
    stream: true,
    promptTokens: 0,
    thinkingTokens: 0,
    answerTokens: 0,
    tokensPerSecond: null,
    firstTokenMs: null,
    totalMs: null,
    policy: "lethe",
    budgetCells: 4096,
    sample: null,
    error: null,
    ...overrides
});

describe("API server state", () => {
    test("addresses are checked as the main process checks them", () => {
        expect(checkAddress("127.0.0.1", "8080")).toBeNull();
        expect(checkAddress("0.0.0.0", "0")).toBeNull();
        expect(checkAddress("my host", "8080")).toMatch(/host name or an IP/);
        expect(checkAddress("127.0.0.1", "70000")).toMatch(/0 to 65535/);
        expect(isLoopbackHost("127.0.0.1")).toBe(true);
        expect(isLoopbackHost("0.0.0.0")).toBe(false);
    });

    test("turns the server on, and shows a generated key once", async () => {
        const bridge = createFakeBridge();
        const server = createServer(bridge.api);
        bridge.reply("server:get", {status: status(), log: [entry({state: "done"})]});
        await server.load();
        expect(server.state.status?.running).toBe(false);
        expect(server.state.log).toHaveLength(1);

        bridge.handle("server:update", (patch) => ({
            ok: true,
            value: status({settings: {...status().settings, ...patch}, running: true, url: "http://127.0.0.1:8080/v1"})
        }));
        expect(await server.update({enabled: true})).toBe(true);
        expect(bridge.calls.at(-1)).toEqual({channel: "server:update", payload: {enabled: true}});
        expect(server.state.status?.url).toBe("http://127.0.0.1:8080/v1");

        bridge.reply("server:generateKey", {key: "pk-secret", status: status({hasKey: true})});
        await server.generateKey();
        expect(server.state.newKey).toBe("pk-secret");
        server.hideKey();
        expect(server.state.newKey).toBeNull();
        expect(server.state.status?.hasKey).toBe(true);

        bridge.fail("server:update", "BAD_REQUEST", "An API key is required to listen on 0.0.0.0");
        expect(await server.update({host: "0.0.0.0"})).toBe(false);
        expect(server.state.error).toBe("Could not change the API server: An API key is required to listen on 0.0.0.0");
    });

    test("keeps the log live from events, newest first, and the gauge on the latest reading", () => {
        const bridge = createFakeBridge();
        const server = createServer(bridge.api);
        bridge.emit("server:request", entry({id: "a"}));
        bridge.emit("server:request", entry({id: "b"}));
        const sample = {liveBytes: 10, fullBytes: 40} as ServerRequestLog["sample"];
        bridge.emit("server:request", entry({id: "a", state: "done", thinkingTokens: 12, sample}));
        expect(server.state.log.map((e) => [e.id, e.state])).toEqual([
            ["b", "running"],
            ["a", "done"]
        ]);
        expect(server.selected?.id).toBe("a");
        bridge.emit("server:status", status({running: true}));
        expect(server.state.status?.running).toBe(true);
        server.dispose();
        expect(bridge.listenerCount("server:request")).toBe(0);
    });
});
