import {createHash, randomUUID} from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import type {DownloadStatus} from "../../preload/contract.js";
import {AppError} from "../AppError.js";
import {startFilesDownload, type FilesDownload} from "../engine/host/downloadModel.js";
import {trimkvReleaseFiles, trimkvReleases} from "../engine/retention/trimkvReleases.js";
import {probeDownload, type ProbeOptions} from "./probeDownload.js";
import type {ModelService} from "./ModelService.js";
import type {Emit} from "./types.js";

export type DownloadServiceOptions = {
    /** Downloads that may run at once; more are refused. Defaults to `2`. */
    maxConcurrent?: number;
    /** Bytes that must stay free on the disk after a download. Defaults to `512 MiB`. */
    reserveBytes?: number;
    /** How an http(s) URL is asked for before the download starts (tries, timeout, pauses). Defaults to probeDownload's. */
    probe?: ProbeOptions;
    /** Where Hugging Face repositories are fetched from (`<endpoint>/<repo>/resolve/main/<file>`). Defaults to `$HF_ENDPOINT`, else `https://huggingface.co`. */
    hfEndpoint?: string;
};

type Entry = {status: DownloadStatus; download: FilesDownload | null; staging: string};

/** What a download fetches (one URI or several files into one folder) and what is done with the files when all are there. */
type Job = {
    /** The download's name in its status (what is resumed), and what its partial folder is named by. */
    uri: string;
    key: string;
    urls: string[];
    /** Turns the finished files into the status's result; throws in words (the files are then deleted). */
    finish(files: string[]): Promise<Partial<DownloadStatus>>;
    /** What "already being downloaded" says. */
    what: string;
};

/**
 * Model downloads by URL or Hugging Face URI into the models folder, with progress events, cancel, and resume.
 * Each URI downloads into its own folder under `.partial/` (named by a hash of the URI), so a partial file is
 * resumed only by the same URI, never by another file that happens to share its name and size; a finished file
 * moves into the models folder and its partial folder goes.
 */
export class DownloadService {
    private readonly _downloads = new Map<string, Entry>();

    constructor(
        private readonly _dir: string,
        private readonly _models: ModelService,
        private readonly _emit: Emit,
        private readonly _options: DownloadServiceOptions = {}
    ) {}

    list(): DownloadStatus[] {
        return [...this._downloads.values()].map((entry) => entry.status);
    }

    async start(uri: string): Promise<DownloadStatus> {
        const trimmed = uri.trim();
        if (!/^(https?:\/\/|hf:)/.test(trimmed))
            throw new AppError("BAD_REQUEST", "Give a model as an http(s) URL or a Hugging Face URI like hf:user/repo:Q4_K_M");
        return this._run({
            uri: trimmed,
            key: trimmed,
            urls: [trimmed],
            what: "This model",
            finish: async ([file]) => {
                const target = await freeName(this._dir, path.basename(file!));
                await fs.rename(file!, target);
                return {model: await this._models.add(target)};
            }
        });
    }

    /**
     * Downloads the TRIM-KV authors' released gates (`config.json` and `trimkv_weights.pth` of one of the repositories in
     * trimkvReleases) for a model, with the progress, cancel and resume of a model download, then converts them into the
     * model's retention sidecar (ModelService.convertTrimkv, which refuses in words gates that are not "rg" gates of this
     * model's shape). A refused or damaged download installs nothing, and its files are deleted.
     */
    async startGates(modelId: string, repo: string): Promise<DownloadStatus> {
        if (!trimkvReleases.some((release) => release.repo === repo))
            throw new AppError("BAD_REQUEST", `${repo} is not one of the TRIM-KV gates the authors released`);
        const model = this._models.get(modelId);
        const endpoint = (this._options.hfEndpoint ?? process.env.HF_ENDPOINT ?? "https://huggingface.co").replace(/\/+$/, "");
        const urls = [trimkvReleaseFiles.config, trimkvReleaseFiles.weights].map((file) => `${endpoint}/${repo}/resolve/main/${file}`);
        return this._run(
            {
                uri: `${endpoint}/${repo}`,
                key: `gates\n${model.id}\n${endpoint}/${repo}`,
                urls,
                what: "These gates",
                finish: async ([config, weights]) => {
                    const converted = await this._models.convertTrimkv(model.id, weights!, config!);
                    return {gates: {modelId: model.id, repo, converted}};
                }
            },
            {modelId: model.id, repo, converted: null}
        );
    }

    private async _run(job: Job, gates?: NonNullable<DownloadStatus["gates"]>): Promise<DownloadStatus> {
        const trimmed = job.uri;
        const running = [...this._downloads.values()].filter((entry) => entry.status.state === "downloading");
        if (running.some((entry) => entry.status.uri === trimmed)) throw new AppError("BUSY", `${job.what} is already being downloaded`);
        const maxConcurrent = this._options.maxConcurrent ?? 2;
        if (running.length >= maxConcurrent)
            throw new AppError("BUSY", `${running.length} downloads are running, the most at once: wait for one or cancel it`);

        const status: DownloadStatus = {
            downloadId: randomUUID(),
            uri: trimmed,
            state: "downloading",
            downloadedBytes: 0,
            totalBytes: 0,
            error: null,
            model: null,
            ...(gates != null ? {gates} : {})
        };
        const staging = path.join(this._dir, ".partial", createHash("sha256").update(job.key).digest("hex").slice(0, 16));
        const entry: Entry = {status, download: null, staging};
        this._downloads.set(status.downloadId, entry);
        const update = (patch: Partial<DownloadStatus>) => {
            if (entry.status.state !== "downloading") return;
            entry.status = {...entry.status, ...patch};
            this._emit("models:download", entry.status);
        };
        // Announced at once, so it can be cancelled while its size is still being asked for.
        this._emit("models:download", entry.status);

        try {
            await fs.mkdir(staging, {recursive: true});
            // A size beyond the disk is refused before the downloader sees it (it plans its chunks from the size).
            // An http(s) server is asked first: a refused connection, an unknown host or a 404 fails here within seconds,
            // where the downloader would keep retrying at 0 bytes.
            let announced: number | null = null;
            for (const url of job.urls)
                if (/^https?:\/\//i.test(url)) {
                    const size = await probeDownload(url, this._options.probe).catch((err: Error) => {
                        throw job.urls.length > 1 ? new Error(`${path.posix.basename(new URL(url).pathname)}: ${err.message}`) : err;
                    });
                    announced = size == null ? announced : (announced ?? 0) + size;
                }
            const free = await freeBytes(staging);
            if (announced != null && free != null && announced > free) {
                update({
                    state: "error",
                    error: `Not enough disk space for ${trimmed}: it needs ${formatBytes(announced)}, ${formatBytes(free)} are free`
                });
                await this._discard(entry);
                return entry.status;
            }
            entry.download = await startFilesDownload(job.urls, staging, (downloadedBytes, totalBytes) =>
                update({downloadedBytes, totalBytes})
            );
        } catch (err) {
            update({state: "error", error: `Cannot download ${trimmed}: ${(err as Error).message}`});
            await this._discard(entry);
            return entry.status;
        }
        if (entry.status.state === "cancelled") {
            await entry.download.cancel();
            await fs.rmdir(staging).catch(() => {}); // only when nothing was transferred
            return entry.status;
        }

        const needed = entry.download.totalBytes - (await partialBytes(staging)) + (this._options.reserveBytes ?? 512 * 1024 * 1024);
        const free = await freeBytes(staging);
        if (free != null && needed > free) {
            update({
                state: "error",
                error: `Not enough disk space for ${trimmed}: it needs ${formatBytes(needed)} (with room to spare), ${formatBytes(free)} are free`
            });
            await this._discard(entry);
            return entry.status;
        }
        update({totalBytes: entry.download.totalBytes});

        entry.download.start().then(
            async (files) => {
                if (entry.status.state !== "downloading") return;
                try {
                    const result = await job.finish(files);
                    await fs.rm(staging, {recursive: true, force: true});
                    update({state: "done", downloadedBytes: entry.status.totalBytes, ...result});
                } catch (err) {
                    update({state: "error", error: (err as Error).message});
                    await fs.rm(staging, {recursive: true, force: true}).catch(() => {});
                }
            },
            async (err: unknown) => {
                if (entry.status.state !== "downloading") return;
                update({state: "error", error: `Download failed: ${(err as Error).message}`});
                await this._discard(entry);
            }
        );
        return entry.status;
    }

    /** Stops a download; its partial file stays for a later download of the same URI to resume. */
    async cancel(downloadId: string): Promise<void> {
        const entry = this._downloads.get(downloadId);
        if (entry == null) throw new AppError("NOT_FOUND", "No such download");
        if (entry.status.state !== "downloading") return;
        entry.status = {...entry.status, state: "cancelled"};
        this._emit("models:download", entry.status);
        await entry.download?.cancel();
    }

    async dispose(): Promise<void> {
        for (const entry of this._downloads.values()) if (entry.status.state === "downloading") await entry.download?.cancel();
    }

    /** Deletes a failed download's partial file and folder. */
    private async _discard(entry: Entry): Promise<void> {
        await entry.download?.cancel({discard: true}).catch(() => {});
        await fs.rm(entry.staging, {recursive: true, force: true}).catch(() => {});
    }
}

async function partialBytes(dir: string): Promise<number> {
    let total = 0;
    for (const name of await fs.readdir(dir).catch(() => [])) total += (await fs.stat(path.join(dir, name)).catch(() => null))?.size ?? 0;
    return total;
}

async function freeBytes(dir: string): Promise<number | null> {
    try {
        const stats = await fs.statfs(dir);
        return stats.bavail * stats.bsize;
    } catch {
        return null;
    }
}

/** `name` in `dir`, or, when a file of that name is there already, the name with a short suffix that is free. */
async function freeName(dir: string, name: string): Promise<string> {
    const extension = path.extname(name);
    const base = name.slice(0, name.length - extension.length);
    for (let attempt = 0; ; attempt++) {
        const candidate = path.join(dir, attempt === 0 ? name : `${base}-${attempt + 1}${extension}`);
        try {
            await fs.access(candidate);
        } catch {
            return candidate;
        }
    }
}

function formatBytes(bytes: number): string {
    return bytes >= 1024 ** 3 ? `${(bytes / 1024 ** 3).toFixed(1)} GiB` : `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
}
