// Model downloads.

import type {ConvertedTrimkvGates, ModelInfo} from "./models.js";

export type DownloadState = "downloading" | "done" | "cancelled" | "error";
export type DownloadStatus = {
    downloadId: string;
    uri: string;
    state: DownloadState;
    downloadedBytes: number;
    totalBytes: number;
    error: string | null;
    model: ModelInfo | null;
    /**
     * A download of the TRIM-KV authors' released gates for a model (`models:getTrimkvGates`): the model, the Hugging Face
     * repository, and, once downloaded and converted, what was installed. Absent for a model download.
     */
    gates?: {modelId: string; repo: string; converted: ConvertedTrimkvGates | null};
};
