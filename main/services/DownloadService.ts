import {randomUUID} from "node:crypto";
import type {DownloadStatus} from "../../preload/contract.js";
import {AppError} from "../AppError.js";
import {startModelDownload, type ModelDownload} from "../engine/downloadModel.js";
import type {ModelService} from "./ModelService.js";
import type {Emit} from "./types.js";

/**
 * Model downloads by URL or Hugging Face URI into the models folder, with progress events, cancel, and
 * resume (a partial file is kept and continued by the next download of the same URI).
 */
export class DownloadService {
    private readonly _downloads = new Map<string, {status: DownloadStatus, download: ModelDownload | null}>();

    constructor(private readonly _dir: string, private readonly _models: ModelService, private readonly _emit: Emit) {}

    list(): DownloadStatus[] {
        return [...this._downloads.values()].map((entry) => entry.status);
    }

    async start(uri: string): Promise<DownloadStatus> {
        const trimmed = uri.trim();
        if (!/^(https?:\/\/|hf:)/.test(trimmed))
            throw new AppError("BAD_REQUEST", "Give a model as an http(s) URL or a Hugging Face URI like hf:user/repo:Q4_K_M");
        for (const entry of this._downloads.values()) {
            if (entry.status.uri === trimmed && entry.status.state === "downloading")
                throw new AppError("BUSY", "This model is already being downloaded");
        }

        const status: DownloadStatus = {downloadId: randomUUID(), uri: trimmed, state: "downloading", downloadedBytes: 0, totalBytes: 0, error: null, model: null};
        const entry: {status: DownloadStatus, download: ModelDownload | null} = {status, download: null};
        this._downloads.set(status.downloadId, entry);
        const update = (patch: Partial<DownloadStatus>) => {
            entry.status = {...entry.status, ...patch};
            this._emit("models:download", entry.status);
        };

        try {
            entry.download = await startModelDownload(trimmed, this._dir, (downloadedBytes, totalBytes) => update({downloadedBytes, totalBytes}));
        } catch (err) {
            update({state: "error", error: `Cannot download ${trimmed}: ${(err as Error).message}`});
            return entry.status;
        }
        update({totalBytes: entry.download.totalBytes});

        void entry.download.done.then(async (path) => {
            if (entry.status.state === "cancelled")
                return;
            try {
                const model = await this._models.add(path);
                update({state: "done", downloadedBytes: entry.status.totalBytes, model});
            } catch (err) {
                update({state: "error", error: (err as Error).message});
            }
        }, (err: unknown) => {
            if (entry.status.state !== "cancelled")
                update({state: "error", error: `Download failed: ${(err as Error).message}`});
        });
        return entry.status;
    }

    async cancel(downloadId: string): Promise<void> {
        const entry = this._downloads.get(downloadId);
        if (entry == null)
            throw new AppError("NOT_FOUND", "No such download");
        if (entry.status.state !== "downloading")
            return;
        entry.status = {...entry.status, state: "cancelled"};
        await entry.download?.cancel();
        this._emit("models:download", entry.status);
    }

    async dispose(): Promise<void> {
        for (const entry of this._downloads.values())
            if (entry.status.state === "downloading")
                await entry.download?.cancel();
    }
}
