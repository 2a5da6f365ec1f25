import http from "node:http";
import type {AddressInfo} from "node:net";
import {afterEach, describe, expect, it} from "vitest";
import {DownloadProbeError, probeDownload} from "../../../main/services/probeDownload.js";

const servers: http.Server[] = [];
afterEach(async () => {
    for (const server of servers.splice(0)) {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
    }
});

async function serve(handler: http.RequestListener): Promise<string> {
    const server = http.createServer(handler);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}/model.gguf`;
}

describe("probeDownload", () => {
    it("fails within seconds, with the reason, when nothing listens at the address", async () => {
        const closed = http.createServer();
        await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
        const port = (closed.address() as AddressInfo).port;
        await new Promise((resolve) => closed.close(resolve));
        const started = Date.now();
        const error = await probeDownload(`http://127.0.0.1:${port}/model.gguf`).catch((err: unknown) => err);
        expect(error).toBeInstanceOf(DownloadProbeError);
        expect((error as Error).message).toMatch(/refused/);
        // Port 9 (discard) is one web requests may not use at all: said so, at once.
        await expect(probeDownload("http://127.0.0.1:9/model.gguf")).rejects.toThrow(/port 9 .*blocked/);
        expect(Date.now() - started).toBeLessThan(3000);
    });

    it("fails at once on a 404, and reads the announced size of a file that is there", async () => {
        let requests = 0;
        const url = await serve((req, res) => {
            requests++;
            if (req.url === "/model.gguf") res.writeHead(200, {"content-length": "1234"}).end(Buffer.alloc(1234));
            else res.writeHead(404).end();
        });
        expect(await probeDownload(url)).toBe(1234);
        requests = 0;
        await expect(probeDownload(url.replace("model", "missing"), {backoffMs: 1})).rejects.toThrow(/answered 404/);
        expect(requests).toBe(1);
    });

    it("tries a transient failure again, and gives up after the tries with their count", async () => {
        let requests = 0;
        const url = await serve((_req, res) => {
            requests++;
            if (requests < 3) res.writeHead(503).end();
            else res.writeHead(200, {"content-length": "10"}).end(Buffer.alloc(10));
        });
        expect(await probeDownload(url, {backoffMs: 1})).toBe(10);
        expect(requests).toBe(3);
        requests = -10;
        await expect(probeDownload(url, {backoffMs: 1, attempts: 2})).rejects.toThrow(/503.*tried 2 times/);
    });

    it("gives up on a server that accepts the connection and never answers", async () => {
        const url = await serve(() => {});
        const started = Date.now();
        await expect(probeDownload(url, {timeoutMs: 200, attempts: 2, backoffMs: 1})).rejects.toThrow(/did not answer within/);
        expect(Date.now() - started).toBeLessThan(2000);
    });
});
