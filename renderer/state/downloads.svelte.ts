import type {DownloadStatus, PonderApi} from "../../preload/contract.js";
import {describeError} from "../lib/describeError.js";
import type {Models} from "./models.svelte.js";
import {request} from "./request.js";
import {succeeded} from "./succeeded.js";

export type Downloads = ReturnType<typeof createDownloads>;

/** What a person may type to download a model: an http(s) URL or `hf:user/repo[:quant]` (also `hf:user/repo/file.gguf`). */
export function checkModelUri(uri: string): string | null {
    const trimmed = uri.trim();
    if (trimmed === "") return "Enter a Hugging Face URI (hf:user/repo:Q4_K_M) or a URL of a .gguf file";
    if (/^hf:/i.test(trimmed))
        return /^hf:[\w.-]+\/[\w.-]+(?:[:/][\w.\-/]+)?$/i.test(trimmed) ? null : "A Hugging Face URI looks like hf:user/repo:Q4_K_M";
    try {
        // eslint-disable-next-line svelte/prefer-svelte-reactivity -- parsed to be checked, never displayed
        const url = new URL(trimmed);
        return url.protocol === "http:" || url.protocol === "https:" ? null : "Only http(s) URLs and hf: URIs can be downloaded";
    } catch {
        return "Enter a Hugging Face URI (hf:user/repo:Q4_K_M) or a URL of a .gguf file";
    }
}

/** `0..100` for a download with a known size, else `null`. */
export function downloadPercent(status: Pick<DownloadStatus, "state" | "downloadedBytes" | "totalBytes">): number | null {
    if (status.state === "done") return 100;
    if (!(status.totalBytes > 0)) return null;
    return Math.min(100, Math.floor((status.downloadedBytes / status.totalBytes) * 100));
}

/** Model downloads by URI: start, progress from `models:download` events, cancel, resume (the same URI again). */
export function createDownloads(bridge: PonderApi, models: Models) {
    const state = $state({
        /** The URI being typed. */
        uri: "",
        /** Newest first. */
        items: [] as DownloadStatus[],
        starting: false,
        error: null as string | null,
        /** Why the last download of released TRIM-KV gates could not start, for the model it was asked for. */
        gatesError: null as {modelId: string; text: string} | null
    });

    // A status never goes back: a finished download stays finished, a running one only grows (events and responses may cross).
    function newer(existing: DownloadStatus, incoming: DownloadStatus): boolean {
        if (existing.state !== "downloading") return false;
        return incoming.state !== "downloading" || incoming.downloadedBytes >= existing.downloadedBytes;
    }

    function upsert(status: DownloadStatus): void {
        const index = state.items.findIndex((item) => item.downloadId === status.downloadId);
        if (index < 0) {
            // A new attempt (a resume) replaces the stopped entries of its URI.
            const stopped = (item: DownloadStatus) => item.uri === status.uri && (item.state === "cancelled" || item.state === "error");
            state.items = [status, ...state.items.filter((item) => !stopped(item))];
        } else if (newer(state.items[index]!, status)) state.items[index] = status;
        else return;
        if (status.state === "done" && status.model) models.upsert(status.model);
        if (status.state === "done" && status.gates?.converted != null) void models.gatesInstalled(status.gates.modelId);
    }

    async function refresh(): Promise<void> {
        const result = await request(bridge, "models:downloads", undefined);
        if (result.ok) for (const status of result.value) upsert(status);
    }

    /** Starts (or resumes: a partial file is continued) the download of `uri`, defaulting to the typed one. */
    async function start(uri: string = state.uri): Promise<boolean> {
        const problem = checkModelUri(uri);
        if (problem) {
            state.error = problem;
            return false;
        }
        state.starting = true;
        state.error = null;
        const result = await request(bridge, "models:download", {uri: uri.trim()});
        state.starting = false;
        if (!succeeded(result, state, "Could not start the download")) return false;
        upsert(result.value);
        if (uri.trim() === state.uri.trim()) state.uri = "";
        return true;
    }

    /**
     * Starts (or resumes) the download of the TRIM-KV authors' released gates in `repo` for a model; they are converted and
     * installed when it ends, and the model's details read again.
     */
    async function startGates(modelId: string, repo: string): Promise<boolean> {
        state.gatesError = null;
        const result = await request(bridge, "models:getTrimkvGates", {id: modelId, repo});
        if (!result.ok) {
            state.gatesError = {modelId, text: describeError("Could not start the download of the TRIM-KV gates", result.error)};
            return false;
        }
        upsert(result.value);
        return true;
    }

    /** The newest download of released gates for a model, if any. */
    function gatesOf(modelId: string): DownloadStatus | null {
        return state.items.find((item) => item.gates?.modelId === modelId) ?? null;
    }

    async function cancel(downloadId: string): Promise<boolean> {
        const result = await request(bridge, "models:cancelDownload", {downloadId});
        if (!result.ok) {
            state.error = describeError("Could not cancel the download", result.error);
            return false;
        }
        const item = state.items.find((entry) => entry.downloadId === downloadId);
        if (item?.state === "downloading") item.state = "cancelled";
        return true;
    }

    /** Continues a cancelled or failed download where its partial file ends. */
    function resume(downloadId: string): Promise<boolean> {
        const item = state.items.find((entry) => entry.downloadId === downloadId);
        if (item?.gates != null) return startGates(item.gates.modelId, item.gates.repo);
        return item ? start(item.uri) : Promise.resolve(false);
    }

    function dismiss(downloadId: string): void {
        state.items = state.items.filter((item) => item.downloadId !== downloadId);
    }

    const offDownload = bridge.on("models:download", upsert);

    return {
        state,
        get active() {
            return state.items.some((item) => item.state === "downloading");
        },
        refresh,
        start,
        startGates,
        gatesOf,
        cancel,
        resume,
        dismiss,
        dispose(): void {
            offDownload();
        }
    };
}
