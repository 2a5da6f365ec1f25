// The TRIM-KV authors' released gates fetched from Hugging Face in the app (models:getTrimkvGates): config.json and
// trimkv_weights.pth come through the model download machinery (progress, cancel, resume) from $HF_ENDPOINT, here a
// loopback server serving checkpoints written by torch for the tiny qwen3 fixture's shape, and are converted and
// installed. A 404, an unreachable host, a cancelled download, a truncated file and an rg2 config each end in a clear
// error with nothing installed and the model file as it was. Needs Python with torch (Debian's python3-torch).
import {createHash} from "node:crypto";
import {execFileSync} from "node:child_process";
import fs from "node:fs/promises";
import http from "node:http";
import type {AddressInfo} from "node:net";
import os from "node:os";
import path from "node:path";
import {afterAll, beforeAll, describe, expect, test} from "vitest";
import type {DownloadStatus, EventChannel, Events} from "../../preload/contract.js";
import {AppDatabase} from "../../main/db/AppDatabase.js";
import {findRetentionGates, retentionSidecarPath} from "../../main/engine/retention/findRetentionGates.js";
import {createDispatch} from "../../main/ipc/dispatch.js";
import {createHandlers} from "../../main/ipc/handlers.js";
import {AppServices} from "../../main/services/AppServices.js";
import {getFixtureModelInfo} from "../fixtures/gguf/fixtures.js";
import {torchPython} from "../fixtures/torchPython.js";
import {FakeEngine} from "../unit/main/FakeEngine.js";

const root = path.resolve(import.meta.dirname, "../..");

/** A Hugging Face stand-in: `/<repo>/resolve/main/<file>` from `files`, with Range requests; `slow` repos send 64 KiB per 20 ms. */
async function hubServer(files: Record<string, Buffer>, slow: Set<string>) {
    const ranges: string[] = [];
    const server = http.createServer((req, res) => {
        const body =
            files[
                decodeURIComponent(req.url ?? "")
                    .replace(/^\//, "")
                    .replace("/resolve/main/", "/")
            ];
        if (body == null) {
            res.writeHead(404, {"content-type": "text/plain"});
            return void res.end("Entry not found");
        }
        const range = /bytes=(\d+)-(\d*)/.exec(req.headers.range ?? "");
        const start = range != null ? Number(range[1]) : 0;
        const end = range != null && range[2] !== "" ? Number(range[2]) : body.length - 1;
        if (req.method === "GET") ranges.push(`${req.url} ${req.headers.range ?? "none"}`);
        res.writeHead(range != null ? 206 : 200, {
            "content-type": "application/octet-stream",
            "accept-ranges": "bytes",
            "content-length": end - start + 1,
            ...(range != null ? {"content-range": `bytes ${start}-${end}/${body.length}`} : {})
        });
        if (req.method === "HEAD") return void res.end();
        const step = [...slow].some((repo) => req.url?.startsWith(`/${repo}/`)) ? 64 * 1024 : 16 * 1024 * 1024;
        let offset = start;
        const timer = setInterval(() => {
            if (offset > end || res.destroyed) {
                clearInterval(timer);
                res.end();
                return;
            }
            res.write(body.subarray(offset, Math.min(end + 1, offset + step)));
            offset += step;
        }, 20);
        res.on("close", () => clearInterval(timer));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return {
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        ranges,
        close: () => new Promise<void>((r) => server.close(() => r()))
    };
}

describe("the authors' released TRIM-KV gates downloaded and converted in the app", () => {
    let dir: string;
    let hub: Awaited<ReturnType<typeof hubServer>>;
    let weights: Buffer;
    const file = (name: string) => path.join(dir, name);
    const rg = {
        retention_gate: "rg",
        hidden_act: "silu",
        memory_size: 512,
        num_hidden_layers: 4,
        hidden_size: 160,
        num_key_value_heads: 2,
        base_model: "Qwen/Qwen3-1.7B"
    };

    beforeAll(async () => {
        dir = await fs.mkdtemp(path.join(os.tmpdir(), "ponder-trimkv-hub-"));
        const info = await getFixtureModelInfo("tiny-qwen3");
        // Wide gates (13 MB in F32): more than the downloader's 5 MiB chunk, so a cancelled download leaves whole chunks to resume from.
        execFileSync(
            torchPython(),
            [
                path.join(root, "test/fixtures/torchCheckpoints.py"),
                JSON.stringify([{job: "trimkv", model: info.path, hidden: 5000, out: file("weights.pth"), seed: 7, dtype: "f32"}])
            ],
            {encoding: "utf8", timeout: 240_000}
        );
        weights = await fs.readFile(file("weights.pth"));
        const json = (value: object) => Buffer.from(JSON.stringify(value));
        hub = await hubServer(
            {
                "ngocbh/TrimKV-Qwen3-1.7B-Math/config.json": json(rg),
                "ngocbh/TrimKV-Qwen3-1.7B-Math/trimkv_weights.pth": weights,
                "ngocbh/TrimKV-Qwen3-4B-Math/config.json": json({...rg, retention_gate: "rg2"}),
                "ngocbh/TrimKV-Qwen3-4B-Math/trimkv_weights.pth": weights,
                "ngocbh/TrimKV-Qwen3-14B-Math/config.json": json(rg),
                "ngocbh/TrimKV-Qwen3-14B-Math/trimkv_weights.pth": weights.subarray(0, Math.floor(weights.length / 2))
            },
            new Set(["ngocbh/TrimKV-Qwen3-1.7B-Math"])
        );
    }, 300_000);

    afterAll(async () => {
        await hub?.close();
        await fs.rm(dir, {recursive: true, force: true});
    });

    test("fetched from $HF_ENDPOINT with progress, cancelled, resumed, converted and installed; every bad download refused and nothing installed", async () => {
        const modelsDir = file("models");
        await fs.mkdir(modelsDir);
        const modelPath = path.join(modelsDir, "tiny-qwen3.gguf");
        await fs.copyFile((await getFixtureModelInfo("tiny-qwen3")).path, modelPath);
        const modelHash = createHash("sha256")
            .update(await fs.readFile(modelPath))
            .digest("hex");
        const events: DownloadStatus[] = [];
        const emit = <C extends EventChannel>(channel: C, payload: Events[C]) => {
            if (channel === "models:download") events.push(payload as DownloadStatus);
        };
        const services = new AppServices(new AppDatabase(":memory:"), new FakeEngine().asEngine(), emit, {
            version: "test",
            modelsDir,
            chat: {flushIntervalMs: 0}
        });
        const dispatch = createDispatch(createHandlers(services, {openExternal: async () => {}, pickModelFile: async () => null}));
        const last = (downloadId: string) => events.filter((event) => event.downloadId === downloadId).at(-1)!;
        const ended = async (status: DownloadStatus) => {
            await expect.poll(() => last(status.downloadId).state, {timeout: 60_000}).not.toBe("downloading");
            return last(status.downloadId);
        };
        const getGates = async (id: string, repo: string) => {
            const started = await dispatch("models:getTrimkvGates", {id, repo});
            if (!started.ok) throw new Error(started.error.message);
            return started.value as DownloadStatus;
        };
        const untouched = async () => {
            expect(
                createHash("sha256")
                    .update(await fs.readFile(modelPath))
                    .digest("hex")
            ).toBe(modelHash);
            await expect(fs.access(retentionSidecarPath(modelPath))).rejects.toThrow();
            expect(await fs.readdir(path.join(modelsDir, ".partial")).catch(() => [])).toEqual([]);
            expect((await fs.readdir(modelsDir)).filter((name) => name !== ".partial")).toEqual(["tiny-qwen3.gguf"]);
        };
        const saved = process.env.HF_ENDPOINT;
        try {
            const added = await dispatch("models:add", {path: modelPath});
            if (!added.ok) throw new Error(added.error.message);
            const id = (added.value as {id: string}).id;
            // The tiny model matches no release (its shape is no released base model's): the nearest one and what differs.
            expect(await dispatch("models:details", {id})).toMatchObject({
                ok: true,
                value: {
                    trimkvReleases: {
                        releases: [],
                        why: /^No TRIM-KV gates were released for a model of this shape\. The nearest release, ngocbh\/TrimKV-Qwen3-1\.7B-Math \(for Qwen3-1\.7B\), differs in layers \(28, this model 4\)/
                    }
                }
            });
            expect(await dispatch("models:getTrimkvGates", {id, repo: "someone/else"})).toMatchObject({
                ok: false,
                error: {code: "BAD_REQUEST", message: "someone/else is not one of the TRIM-KV gates the authors released"}
            });

            // An unreachable host: a port where nothing listens any more.
            const closed = http.createServer();
            await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
            const deadPort = (closed.address() as AddressInfo).port;
            await new Promise<void>((resolve) => closed.close(() => resolve()));
            process.env.HF_ENDPOINT = `http://127.0.0.1:${deadPort}`;
            const refused = await ended(await getGates(id, "ngocbh/TrimKV-Qwen3-1.7B-Math"));
            expect(refused).toMatchObject({state: "error", gates: {modelId: id, repo: "ngocbh/TrimKV-Qwen3-1.7B-Math", converted: null}});
            expect(refused.error).toBe(
                `Cannot download http://127.0.0.1:${deadPort}/ngocbh/TrimKV-Qwen3-1.7B-Math: config.json: the connection was refused ` +
                    "(nothing listens at that address)"
            );
            await untouched();

            process.env.HF_ENDPOINT = `${hub.url}/`;
            // A repository the server does not have.
            const missing = await ended(await getGates(id, "ngocbh/TrimKV-Qwen3-8B-Math"));
            expect(missing.error).toBe(
                `Cannot download ${hub.url}/ngocbh/TrimKV-Qwen3-8B-Math: config.json: the server answered 404 Not Found`
            );
            await untouched();
            // An rg2 checkpoint: downloaded, refused by the converter in words.
            const rg2 = await ended(await getGates(id, "ngocbh/TrimKV-Qwen3-4B-Math"));
            expect(rg2.state).toBe("error");
            expect(rg2.error).toMatch(/^The TRIM-KV gates could not be converted: config\.json says retention_gate "rg2"/);
            await untouched();
            // A truncated trimkv_weights.pth.
            const truncated = await ended(await getGates(id, "ngocbh/TrimKV-Qwen3-14B-Math"));
            expect(truncated.state).toBe("error");
            expect(truncated.error).toMatch(/^The TRIM-KV gates could not be converted: .*(zip|truncated|end of central directory)/i);
            await untouched();

            // Cancelled halfway: nothing installed; the partial file is kept, and asking again resumes it and installs the gates.
            const first = await getGates(id, "ngocbh/TrimKV-Qwen3-1.7B-Math");
            expect(first.totalBytes).toBe(weights.length + Buffer.from(JSON.stringify(rg)).length);
            await expect.poll(() => last(first.downloadId).downloadedBytes, {timeout: 30_000}).toBeGreaterThan(6 * 1024 * 1024);
            await services.downloads.cancel(first.downloadId);
            expect(last(first.downloadId)).toMatchObject({state: "cancelled", gates: {converted: null}});
            await expect(fs.access(retentionSidecarPath(modelPath))).rejects.toThrow();
            expect(await dispatch("models:details", {id})).toMatchObject({ok: true, value: {retention: {available: false}}});

            const second = await getGates(id, "ngocbh/TrimKV-Qwen3-1.7B-Math");
            const done = await ended(second);
            expect(done).toMatchObject({
                state: "done",
                error: null,
                model: null,
                gates: {
                    modelId: id,
                    repo: "ngocbh/TrimKV-Qwen3-1.7B-Math",
                    converted: {
                        layers: 4,
                        hidden: 5000,
                        budget: 512,
                        baseModel: "Qwen/Qwen3-1.7B",
                        source: "converted from trimkv_weights.pth"
                    }
                }
            });
            // Progress came in steps, and the second download went on from where the first stopped.
            expect(
                new Set(events.filter((event) => event.downloadId === first.downloadId).map((event) => event.downloadedBytes)).size
            ).toBeGreaterThan(3);
            expect(hub.ranges.some((range) => /trimkv_weights\.pth bytes=[1-9]\d*-/.test(range))).toBe(true);
            const found = await findRetentionGates({
                path: modelPath,
                architecture: "qwen3",
                layers: 4,
                embeddingLength: 160,
                headCountKv: 2
            });
            expect(found).toMatchObject({
                available: true,
                info: {budget: 512, reduction: "per-head", hidden: 5000, source: "converted from trimkv_weights.pth"}
            });
            expect(await dispatch("models:details", {id})).toMatchObject({ok: true, value: {retention: {available: true, reason: null}}});
            expect(
                createHash("sha256")
                    .update(await fs.readFile(modelPath))
                    .digest("hex")
            ).toBe(modelHash);
            expect(await fs.readdir(path.join(modelsDir, ".partial"))).toEqual([]);
        } finally {
            if (saved === undefined) delete process.env.HF_ENDPOINT;
            else process.env.HF_ENDPOINT = saved;
            await services.dispose();
        }
    });
});
