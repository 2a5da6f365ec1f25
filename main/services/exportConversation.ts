import type {ConversationDetail, KvSample, MessageCompression} from "../../preload/contract.js";

/** A conversation with its settings and memory statistics, as Markdown or JSON. */
export function exportConversation(
    detail: ConversationDetail,
    format: "markdown" | "json"
): {fileName: string; mimeType: string; content: string} {
    const base =
        detail.conversation.title
            .replace(/[^\w\- ]+/g, "")
            .trim()
            .replace(/\s+/g, "-")
            .slice(0, 60) || "conversation";
    if (format === "json")
        return {
            fileName: `${base}.json`,
            mimeType: "application/json",
            content: JSON.stringify({format: "ponder-conversation", version: 1, ...detail}, null, 2)
        };

    const lines = [
        `# ${detail.conversation.title}`,
        "",
        `Settings for its next answer: policy ${detail.settings.compression.policy} · budget: ${describeBudget(detail.settings.compression.budget)} · KV types: K ${detail.settings.compression.kvType}, V ${detail.settings.compression.kvTypeV}`,
        ""
    ];
    for (const message of detail.messages) {
        lines.push(message.role === "user" ? "## User" : "## Assistant", "");
        if (message.thinking !== "") lines.push("<details><summary>Thinking</summary>", "", message.thinking.trim(), "", "</details>", "");
        lines.push(message.text.trim(), "");
        if (message.status !== "complete") lines.push(`_(${message.status}${message.error != null ? `: ${message.error}` : ""})_`, "");
        if (message.compression != null) lines.push(describeCompression(message.compression), "");
        const last = message.stats?.samples.at(-1);
        if (last != null) lines.push(describeSample(last), "");
    }
    return {fileName: `${base}.md`, mimeType: "text/markdown", content: lines.join("\n")};
}

function describeBudget(budget: ConversationDetail["settings"]["compression"]["budget"]): string {
    return budget.kind === "auto" ? "auto" : budget.kind === "cells" ? `${budget.cells} cells` : `${budget.mib} MiB`;
}

/** What an answer ran under: `"Ran under lethe · 128 cells (budget 128 cells) · KV f16."`. */
function describeCompression(compression: MessageCompression): string {
    const cells = compression.budgetCells != null ? ` · ${compression.budgetCells} cells` : "";
    const settings = compression.settings;
    const budget = settings != null ? ` (budget ${describeBudget(settings.budget)})` : "";
    const kvType = settings != null ? ` · KV K ${settings.kvType}, V ${settings.kvTypeV}` : "";
    return `Ran under ${compression.policy}${cells}${budget}${kvType}.`;
}

function describeSample(sample: KvSample): string {
    const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(2)} MiB`;
    const saved = sample.fullBytes > 0 ? Math.round((1 - sample.liveBytes / sample.fullBytes) * 100) : 0;
    return (
        `KV: ${mib(sample.liveBytes)} live of ${mib(sample.allocatedBytes)} allocated; a full cache would hold ${mib(sample.fullBytes)} (${saved}% less). ` +
        `Tokens seen ${sample.tokensSeen}, kept ${sample.cellsLive}; prune rounds ${sample.pruneRounds}, forced drops ${sample.forcedDrops}.`
    );
}
