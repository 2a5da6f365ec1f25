import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import {WebSocket} from "ws";
import {writeCorruptModels} from "../fixtures/gguf/corruptModels.js";
import {getFixtureModel} from "../fixtures/gguf/fixtures.js";
import {rawRequest} from "../fixtures/rawRequest.js";
import {HeadlessPonder} from "./HeadlessPonder.js";

describe("the headless server under hostile requests and files", () => {
    let backend: HeadlessPonder;
    let dataDir: string;

    beforeAll(async () => {
        dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-hostile-"));
        backend = await HeadlessPonder.start({dataDir, model: await getFixtureModel("tiny-qwen2"), seed: 1});
    });
    afterAll(async () => {
        await backend?.stop();
        fs.rmSync(dataDir, {recursive: true, force: true});
    });

    it("stays up through malformed requests, handshakes and frames, and a hostile model file, and still answers", async () => {
        const {port, token} = backend;
        expect(await rawRequest(port, "GET /% HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")).toMatch(/^HTTP\/1\.1 400/);
        const upgrade = (target: string) =>
            `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
        expect(await rawRequest(port, upgrade("http://[::1/bridge"))).toMatch(/^HTTP\/1\.1 400/);
        expect(await rawRequest(port, upgrade("/bridge?token=wrong"))).toMatch(/^HTTP\/1\.1 403/);

        const ws = await new Promise<WebSocket>((resolve, reject) => {
            const socket = new WebSocket(`ws://127.0.0.1:${port}/bridge?token=${token}`);
            socket.once("open", () => resolve(socket));
            socket.once("error", reject);
        });
        let next = 1;
        const call = (channel: string, payload?: unknown) =>
            new Promise<{ok: boolean; value?: unknown; error?: {code: string; message: string}}>((resolve) => {
                const id = next++;
                const onMessage = (data: unknown) => {
                    const frame = JSON.parse(String(data)) as {id?: number; result?: {ok: boolean}};
                    if (frame.id === id) {
                        ws.off("message", onMessage);
                        resolve(frame.result!);
                    }
                };
                ws.on("message", onMessage);
                ws.send(JSON.stringify({id, channel, payload}));
            });

        // A model file whose header claims a 2^31-byte key, in 32 bytes: refused, the process lives.
        const [hostile] = await writeCorruptModels(path.join(dataDir, "corrupt"), await getFixtureModel("tiny-qwen2"));
        const added = await call("models:add", {path: hostile!.path});
        expect(added).toMatchObject({ok: false, error: {code: "MODEL_INVALID"}});

        // An oversized frame closes that socket only.
        const oversized = new WebSocket(`ws://127.0.0.1:${port}/bridge?token=${token}`);
        await new Promise((resolve) => oversized.once("open", resolve));
        oversized.on("error", () => {});
        const closed = new Promise((resolve) => oversized.once("close", resolve));
        oversized.send("x".repeat(2 * 1024 * 1024));
        await closed;

        expect(backend.process.exitCode).toBeNull();
        expect(await fetch(`http://127.0.0.1:${port}/`).then((response) => response.status)).toBe(200);
        const conversation = await call("conversations:create", {});
        expect(conversation.ok).toBe(true);
        ws.close();
    });
});
