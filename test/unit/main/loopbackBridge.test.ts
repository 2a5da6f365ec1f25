import {mkdtemp, rm, writeFile} from "node:fs/promises";
import net from "node:net";
import {tmpdir} from "node:os";
import path from "node:path";
import {afterAll, afterEach, beforeAll, describe, expect, it} from "vitest";
import {WebSocket} from "ws";
import type {Dispatch} from "../../../main/ipc/dispatch.js";
import {LoopbackBridge, type LoopbackBridgeOptions} from "../../../main/ipc/LoopbackBridge.js";
import {rawRequest} from "../../fixtures/rawRequest.js";

let staticDir: string;
let bridge: LoopbackBridge;
const logged: string[] = [];
const echo: Dispatch = async (channel) => ({ok: true, value: channel});

beforeAll(async () => {
    staticDir = await mkdtemp(path.join(tmpdir(), "ponder-loopback-"));
    await writeFile(path.join(staticDir, "index.html"), "<!doctype html><title>Ponder</title>");
});

afterAll(async () => {
    await rm(staticDir, {recursive: true, force: true});
});

afterEach(async () => {
    await bridge?.dispose();
    logged.length = 0;
});

async function start(options: Partial<LoopbackBridgeOptions> = {}): Promise<LoopbackBridge> {
    bridge = await LoopbackBridge.start({
        dispatch: echo,
        staticDir,
        token: "t".repeat(48),
        log: (message) => logged.push(message),
        ...options
    });
    return bridge;
}

const upgrade = (target: string, headers = "") =>
    `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
    `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n${headers}\r\n`;

async function servesIndex(port: number): Promise<void> {
    const response = await fetch(`http://127.0.0.1:${port}/`);
    expect(response.status).toBe(200);
    expect(await response.text()).toContain("Ponder");
}

function connect(port: number, query = `token=${"t".repeat(48)}`, origin?: string): Promise<WebSocket> {
    return new Promise((resolve, reject) => {
        const ws = new WebSocket(`ws://127.0.0.1:${port}/bridge?${query}`, origin != null ? {origin} : {});
        ws.once("open", () => resolve(ws));
        ws.once("error", reject);
    });
}

function request(ws: WebSocket, frame: unknown): Promise<unknown> {
    return new Promise((resolve) => {
        ws.once("message", (data) => resolve(JSON.parse(String(data))));
        ws.send(typeof frame === "string" ? frame : JSON.stringify(frame));
    });
}

describe("Loopback bridge under hostile requests", () => {
    it("answers a malformed percent-encoding with 400 and keeps serving", async () => {
        const {port} = await start();
        for (const target of ["/%", "/%E0%A4%A", "/assets/%zz.js"])
            expect(await rawRequest(port, `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`)).toMatch(
                /^HTTP\/1\.1 400/
            );
        await servesIndex(port);
    });

    it("refuses upgrades with a malformed target, a wrong path, token or Origin, and keeps serving", async () => {
        const {port} = await start();
        expect(await rawRequest(port, upgrade("http://[::1/bridge"))).toMatch(/^HTTP\/1\.1 400/);
        expect(await rawRequest(port, upgrade("/bridge"))).toMatch(/^HTTP\/1\.1 403/);
        expect(await rawRequest(port, upgrade("/elsewhere?token=" + "t".repeat(48)))).toMatch(/^HTTP\/1\.1 403/);
        expect(await rawRequest(port, upgrade("/bridge?token=" + "x".repeat(48)))).toMatch(/^HTTP\/1\.1 403/);
        expect(await rawRequest(port, upgrade("/bridge?token=short"))).toMatch(/^HTTP\/1\.1 403/);
        expect(await rawRequest(port, upgrade("/bridge?token=" + "t".repeat(48), "Origin: http://evil.example\r\n"))).toMatch(
            /^HTTP\/1\.1 403/
        );
        expect(await rawRequest(port, "GET /bridge HTTP/1.1\r\nUpgrade: websocket\r\n\r\n\u0000\u0001garbage")).toMatch(
            /^HTTP\/1\.1 (400|403)/
        );
        expect(await rawRequest(port, "\u0016\u0003\u0001 not http at all\r\n\r\n")).toMatch(/^HTTP\/1\.1 400|^$/);
        await servesIndex(port);
        const ws = await connect(port, undefined, `http://127.0.0.1:${port}`);
        expect(await request(ws, {id: 1, channel: "app:info", payload: undefined})).toEqual({id: 1, result: {ok: true, value: "app:info"}});
        ws.close();
    });

    it("closes a socket that sends an oversized frame, and only that one", async () => {
        const {port} = await start({maxFrameBytes: 1024});
        const good = await connect(port);
        const bad = await connect(port);
        const closed = new Promise<number>((resolve) => bad.once("close", (code) => resolve(code)));
        bad.on("error", () => {});
        bad.send("x".repeat(4096));
        expect(await closed).toBe(1009);
        expect(await request(good, {id: 2, channel: "app:info"})).toMatchObject({id: 2, result: {ok: true}});
        good.close();
    });

    it("ignores frames that are not requests and survives a dispatch that throws", async () => {
        const {port} = await start({
            dispatch: async (channel) => {
                if (channel === "boom") throw new Error("handler exploded");
                return {ok: true, value: channel};
            }
        });
        const ws = await connect(port);
        for (const frame of ["not json", "null", "5", '"text"', "[]", '{"id":"1"}', '{"id":3,"channel":"boom"}']) ws.send(frame);
        expect(await request(ws, {id: 4, channel: "app:info"})).toMatchObject({id: 4, result: {ok: true}});
        expect(logged).toContain("Loopback frame failed");
        ws.close();
    });

    it("caps WebSocket clients and survives a flood of connections", async () => {
        const {port} = await start({maxClients: 4, maxConnections: 64});
        const clients = await Promise.all([0, 1, 2, 3].map(() => connect(port)));
        expect(await rawRequest(port, upgrade("/bridge?token=" + "t".repeat(48)))).toMatch(/^HTTP\/1\.1 503/);

        const flood = await Promise.all(
            Array.from(
                {length: 200},
                () =>
                    new Promise<net.Socket>((resolve) => {
                        const socket = net.connect(port, "127.0.0.1");
                        socket.on("error", () => {});
                        socket.once("connect", () => resolve(socket));
                        socket.once("close", () => resolve(socket));
                    })
            )
        );
        for (const socket of flood) socket.destroy();
        await new Promise((resolve) => setTimeout(resolve, 100));

        expect(await request(clients[0]!, {id: 5, channel: "app:info"})).toMatchObject({id: 5, result: {ok: true}});
        for (const client of clients) client.close();
        await servesIndex(port);
    });
});
