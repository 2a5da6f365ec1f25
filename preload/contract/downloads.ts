// Model downloads.

import type {ModelInfo} from "./models.js";

export type DownloadState = "downloading" | "done" | "cancelled" | "error";
export type DownloadStatus = {
    downloadId: string,
    uri: string,
    state: DownloadState,
    downloadedBytes: number,
    totalBytes: number,
    error: string | null,
    model: ModelInfo | null
};
