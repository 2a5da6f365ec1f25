import type {ConversationDetail, KvSample} from "../../preload/contract.js";

/** A conversation with its settings and memory statistics, as Markdown or JSON. */
export function exportConversation(detail: ConversationDetail, format: "markdown" | "json"): {fileName: string, mimeType: string, content: string} {
    const base = detail.conversation.title.replace(/[^\w\- ]+/g, "").trim().replace(/\s+/g, "-").slice(0, 60) || "conversation";
    if (format === "json")
        return {fileName: `${base}.json`, mimeType: "application/json", content: JSON.stringify({format: "ponder-conversation", version: 1, ...detail}, null, 2)};

    const lines = [`# ${detail.conversation.title}`, "",
        `Policy: ${detail.settings.compression.policy} · budget: ${describeBudget(detail.settings.compression.budget)} · KV type: ${detail.settings.compression.kvType}`, ""];
    for (const message of detail.messages) {
        lines.push(message.role === "user" ? "## User" : "## Assistant", "");
        if (message.thinking !== "")
            lines.push("<details><summary>Thinking</summary>", "", message.thinking.trim(), "", "</details>", "");
        lines.push(message.text.trim(), "");
        if (message.status !== "complete")
            lines.push(`_(${message.status}${message.error != null ? `: ${message.error}` : ""})_`, "");
        const last = message.stats?.samples.at(-1);
        if (last != null)
            lines.push(describeSample(last), "");
    }
    return {fileName: `${base}.md`, mimeType: "text/markdown", content: lines.join("\n")};
}

function describeBudget(budget: ConversationDetail["settings"]["compression"]["budget"]): string {
    return budget.kind === "auto" ? "auto" : budget.kind === "cells" ? `${budget.cells} cells` : `${budget.mib} MiB`;
}

export function describeSample(sample: KvSample): string {
    const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(2)} MiB`;
    const saved = sample.fullBytes > 0 ? Math.round((1 - sample.liveBytes / sample.fullBytes) * 100) : 0;
    return `KV: ${mib(sample.liveBytes)} live of ${mib(sample.allocatedBytes)} allocated; a full cache would hold ${mib(sample.fullBytes)} (${saved}% saved). ` +
        `Tokens seen ${sample.tokensSeen}, kept ${sample.cellsLive}; prune rounds ${sample.pruneRounds}, forced drops ${sample.forcedDrops}.`;
}
