import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import type {AddressInfo} from "node:net";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import type {DownloadStatus, EventChannel, Events} from "../../preload/contract.js";
import {AppDatabase} from "../../main/db/AppDatabase.js";
import {Engine} from "../../main/engine/runtime/Engine.js";
import {loadRuntime} from "../../main/engine/runtime/loadRuntime.js";
import {AppServices} from "../../main/services/AppServices.js";
import {generateModel} from "../fixtures/gguf/generateModel.js";

/** A model host that sends the first download slowly (so it can be cancelled halfway) and honours Range requests. */
async function slowServer(file: string) {
    let gets = 0;
    const body = fs.readFileSync(file);
    const ranges: string[] = [];
    const server = http.createServer((req, res) => {
        const range = /bytes=(\d+)-(\d*)/.exec(req.headers.range ?? "");
        const start = range != null ? Number(range[1]) : 0;
        const end = range != null && range[2] !== "" ? Number(range[2]) : body.length - 1;
        if (req.method === "GET") {
            ranges.push(req.headers.range ?? "none");
            gets++;
        }
        const slow = gets <= 2;
        res.writeHead(range != null ? 206 : 200, {
            "content-type": "application/octet-stream",
            "accept-ranges": "bytes",
            "content-length": end - start + 1,
            ...(range != null ? {"content-range": `bytes ${start}-${end}/${body.length}`} : {})
        });
        if (req.method === "HEAD") return void res.end();
        let offset = start;
        const timer = setInterval(() => {
            if (offset > end || res.destroyed) {
                clearInterval(timer);
                res.end();
                return;
            }
            const step = slow ? 256 * 1024 : 4 * 1024 * 1024;
            res.write(body.subarray(offset, Math.min(end + 1, offset + step)));
            offset += step;
        }, 20);
        res.on("close", () => clearInterval(timer));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return {
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/big.gguf`,
        ranges,
        close: () => new Promise<void>((r) => server.close(() => r()))
    };
}

describe("model downloads", () => {
    let dir: string;
    beforeAll(() => {
        dir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-dl-"));
    });
    afterAll(() => fs.rmSync(dir, {recursive: true, force: true}));

    it("reports progress, cancels, resumes from the partial file and registers the model", async () => {
        // Larger than the downloader's 5 MiB chunk, so a cancelled download leaves whole chunks to resume from.
        const source = path.join(dir, "source.gguf");
        await generateModel(source, {arch: "llama", name: "resumable", nEmbd: 384, nHead: 6, nHeadKv: 2, nFf: 1536, seed: 8});
        const server = await slowServer(source);
        const events: DownloadStatus[] = [];
        const services = new AppServices(
            new AppDatabase(":memory:"),
            new Engine({loadLlama: loadRuntime}),
            <C extends EventChannel>(channel: C, payload: Events[C]) => {
                if (channel === "models:download") events.push(payload as DownloadStatus);
            },
            {version: "t", modelsDir: dir}
        );
        try {
            const first = await services.downloads.start(server.url);
            expect(first.totalBytes).toBe(fs.statSync(source).size);
            await expect
                .poll(() => events.filter((e) => e.downloadId === first.downloadId).at(-1)?.downloadedBytes ?? 0, {timeout: 30_000})
                .toBeGreaterThan(11 * 1024 * 1024);
            await services.downloads.cancel(first.downloadId);
            const cancelled = events.filter((e) => e.downloadId === first.downloadId).at(-1)!;
            expect(cancelled.state).toBe("cancelled");
            expect(cancelled.downloadedBytes).toBeLessThan(first.totalBytes);

            const second = await services.downloads.start(server.url);
            await expect.poll(() => events.filter((e) => e.downloadId === second.downloadId).at(-1)?.state, {timeout: 60_000}).toBe("done");
            const done = events.filter((e) => e.downloadId === second.downloadId).at(-1)!;
            expect(done.model?.name).toBe("resumable");
            expect(fs.readFileSync(path.join(dir, "big.gguf")).equals(fs.readFileSync(source))).toBe(true);
            // The second download continued from where the first stopped.
            expect(server.ranges.some((range) => /^bytes=[1-9]\d*-/.test(range))).toBe(true);
            expect(services.models.list().map((m) => m.name)).toContain("resumable");
        } finally {
            await services.dispose();
            await server.close();
        }
    });

    it("refuses something that is not a URL or a Hugging Face URI", async () => {
        const services = new AppServices(new AppDatabase(":memory:"), new Engine({loadLlama: loadRuntime}), () => {}, {
            version: "t",
            modelsDir: dir
        });
        await expect(services.downloads.start("file:///etc/passwd")).rejects.toThrow(/http\(s\) URL or a Hugging Face URI/);
        await services.dispose();
    });
});
