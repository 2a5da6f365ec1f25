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
import {getFixtureModel} from "../fixtures/gguf/fixtures.js";

type Route = {
    body: Buffer;
    /** Size announced instead of the body's. */ announced?: number;
    headDelayMs?: number;
    /** Bytes per 20 ms. */ rate?: number;
};

/** A model host with one route per path, honouring Range requests. */
async function host(routes: Record<string, Route>) {
    const server = http.createServer((req, res) => {
        const route = routes[req.url ?? ""];
        if (route == null) return void res.writeHead(404).end();
        const size = route.announced ?? route.body.length;
        const range = /bytes=(\d+)-(\d*)/.exec(req.headers.range ?? "");
        const start = range != null ? Number(range[1]) : 0;
        const end = range != null && range[2] !== "" ? Number(range[2]) : size - 1;
        const headers = {
            "content-type": "application/octet-stream",
            "accept-ranges": "bytes",
            "content-length": end - start + 1,
            ...(range != null ? {"content-range": `bytes ${start}-${end}/${size}`} : {})
        };
        if (req.method === "HEAD")
            return void setTimeout(() => res.writeHead(range != null ? 206 : 200, headers).end(), route.headDelayMs ?? 0);
        let offset = start;
        setTimeout(() => res.destroyed || res.writeHead(range != null ? 206 : 200, headers), route.headDelayMs ?? 0);
        const timer = setInterval(() => {
            if (offset > end || res.destroyed) {
                clearInterval(timer);
                return void res.end();
            }
            if (!res.headersSent) return;
            const step = route.rate ?? 4 * 1024 * 1024;
            res.write(route.body.subarray(offset, Math.min(end + 1, offset + step, route.body.length)));
            offset += step;
        }, 20);
        res.on("close", () => clearInterval(timer));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return {
        base,
        close: () =>
            new Promise<void>((resolve) => {
                server.close(() => resolve());
                server.closeAllConnections();
            })
    };
}

function files(dir: string): string[] {
    return fs
        .readdirSync(dir, {recursive: true, withFileTypes: true})
        .filter((entry) => entry.isFile())
        .map((entry) => path.relative(dir, path.join(entry.parentPath, entry.name)))
        .sort();
}

describe("model downloads, safely", () => {
    let root: string;
    let model: Buffer;
    beforeAll(async () => {
        root = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-dl-safe-"));
        model = fs.readFileSync(await getFixtureModel("tiny-llama"));
    });
    afterAll(() => fs.rmSync(root, {recursive: true, force: true}));

    function setup(name: string) {
        const dir = path.join(root, name);
        fs.mkdirSync(dir);
        const events: DownloadStatus[] = [];
        const services = new AppServices(
            new AppDatabase(":memory:"),
            new Engine({loadLlama: loadRuntime}),
            <C extends EventChannel>(channel: C, payload: Events[C]) => {
                if (channel === "models:download") events.push(payload as DownloadStatus);
            },
            {version: "t", modelsDir: dir}
        );
        const last = (id: string) => events.filter((event) => event.downloadId === id).at(-1);
        return {dir, events, services, last};
    }

    it("cancels a download while its size is still being asked for: nothing is transferred or left", async () => {
        const server = await host({"/slow-head.gguf": {body: model, headDelayMs: 600}});
        const {dir, events, services, last} = setup("cancel-early");
        try {
            const starting = services.downloads.start(`${server.base}/slow-head.gguf`);
            await expect.poll(() => events.length).toBeGreaterThan(0);
            await services.downloads.cancel(events[0]!.downloadId);
            expect((await starting).state).toBe("cancelled");
            await new Promise((resolve) => setTimeout(resolve, 300));
            expect(last(events[0]!.downloadId)?.state).toBe("cancelled");
            expect(events.every((event) => event.downloadedBytes === 0)).toBe(true);
            expect(files(dir)).toEqual([]);
            expect(services.models.list()).toEqual([]);
        } finally {
            await services.dispose();
            await server.close();
        }
    });

    it("keys files by URL: another URL with a file of the same name and size is downloaded, not taken for the first; no partial files stay", async () => {
        const other = Buffer.from(model);
        other.write("tiny-other", other.indexOf("tiny-llama"), "latin1"); // another general.name of the same length
        const server = await host({"/a/model.gguf": {body: model}, "/b/model.gguf": {body: other}});
        const {dir, services, last} = setup("same-name");
        try {
            const a = await services.downloads.start(`${server.base}/a/model.gguf`);
            await expect.poll(() => last(a.downloadId)?.state, {timeout: 30_000}).not.toBe("downloading");
            expect(last(a.downloadId)).toMatchObject({state: "done", error: null});
            const b = await services.downloads.start(`${server.base}/b/model.gguf`);
            await expect.poll(() => last(b.downloadId)?.state, {timeout: 30_000}).not.toBe("downloading");
            expect(last(b.downloadId)).toMatchObject({state: "done", error: null});

            const registered = services.models.list();
            expect(registered.map((entry) => entry.name).sort()).toEqual(["tiny-llama", "tiny-other"]);
            expect(new Set(registered.map((entry) => entry.path)).size).toBe(2);
            expect(fs.readFileSync(last(b.downloadId)!.model!.path).equals(other)).toBe(true);
            expect(files(dir)).toEqual(["model-2.gguf", "model.gguf"]);
        } finally {
            await services.dispose();
            await server.close();
        }
    });

    it("refuses a download larger than the free disk space before transferring anything", async () => {
        const server = await host({"/huge.gguf": {body: model, announced: 2 ** 50}});
        const {dir, services, last} = setup("no-space");
        try {
            const started = await services.downloads.start(`${server.base}/huge.gguf`);
            expect(started.state).toBe("error");
            expect(last(started.downloadId)?.error).toMatch(/Not enough disk space .* needs 1048576\.\d GiB/);
            expect(files(dir)).toEqual([]);
        } finally {
            await services.dispose();
            await server.close();
        }
    });

    it("runs at most two downloads at once", async () => {
        const server = await host({"/1.gguf": {body: model, rate: 1024}, "/2.gguf": {body: model, rate: 1024}, "/3.gguf": {body: model}});
        const {services} = setup("concurrent");
        try {
            const first = await services.downloads.start(`${server.base}/1.gguf`);
            const second = await services.downloads.start(`${server.base}/2.gguf`);
            await expect(services.downloads.start(`${server.base}/3.gguf`)).rejects.toMatchObject({code: "BUSY"});
            await services.downloads.cancel(first.downloadId);
            expect((await services.downloads.start(`${server.base}/3.gguf`)).state).toBe("downloading");
            await services.downloads.cancel(second.downloadId);
        } finally {
            await services.dispose();
            await server.close();
        }
    });
});
