import type {DownloadStatus} from "../../preload/contract.js";
import {downloadPercent} from "../state/downloads.svelte.js";
import {formatMemory} from "./formatMemory.js";

/** A download of the authors' released TRIM-KV gates (`models:getTrimkvGates`), in words, as the model's details show it. */
export function describeGatesDownload(status: DownloadStatus): string {
    const percent = downloadPercent(status);
    const repo = status.gates?.repo ?? status.uri;
    switch (status.state) {
        case "downloading":
            return percent == null
                ? `Asking ${repo}…`
                : `Downloading from ${repo}: ${percent}% · ${formatMemory(status.downloadedBytes)} of ${formatMemory(status.totalBytes)}`;
        case "done": {
            const gates = status.gates?.converted;
            if (gates == null) return `Downloaded from ${repo}`;
            return (
                `✓ Installed the gates from ${repo}: ${gates.layers} layers (hidden ${gates.hidden})` +
                (gates.budget != null ? `, trained with ${gates.budget.toLocaleString("en-US")} cells` : "") +
                (gates.baseModel != null ? ` on ${gates.baseModel}` : "") +
                ". TRIM-KV is offered for this model from now on."
            );
        }
        case "cancelled":
            return `Cancelled at ${percent ?? 0}%: get the gates again to resume.`;
        case "error":
            return `Not installed: ${status.error ?? "unknown error"}`;
    }
}
