// Small display formatters shared by several components (one file: each is a line or two).

import type {MessageDto} from "../../preload/contract.js";

/** `4200` -> `"4.2 s"`; minutes past a minute (`"2 min 5 s"`). */
export function formatSeconds(ms: number): string {
    const seconds = Math.max(0, ms) / 1000;
    if (seconds < 60) return `${seconds.toFixed(1)} s`;
    const minutes = Math.floor(seconds / 60);
    return `${minutes} min ${Math.round(seconds - minutes * 60)} s`;
}

/** Generated tokens (thought and answer) per second of the request, or `null` before there is anything to measure. */
export function tokensPerSecond(message: Pick<MessageDto, "thinkingTokens" | "answerTokens" | "totalMs">): number | null {
    const tokens = message.thinkingTokens + message.answerTokens;
    if (tokens <= 0 || message.totalMs <= 0) return null;
    return tokens / (message.totalMs / 1000);
}

/** A short wait: milliseconds under a second, else seconds. */
export function formatLatency(ms: number): string {
    return ms < 1000 ? `${Math.round(Math.max(0, ms))} ms` : formatSeconds(ms);
}

/** Generated tokens per second after the first token (the decode speed), or over the whole answer before it is known. */
export function decodeRate(message: Pick<MessageDto, "thinkingTokens" | "answerTokens" | "totalMs" | "firstTokenMs">): number | null {
    const tokens = message.thinkingTokens + message.answerTokens;
    if (message.firstTokenMs == null || tokens < 2 || message.totalMs <= message.firstTokenMs) return tokensPerSecond(message);
    return (tokens - 1) / ((message.totalMs - message.firstTokenMs) / 1000);
}

/** Prompt tokens read per second before the first token. */
export function promptRate(message: Pick<MessageDto, "promptTokens" | "firstTokenMs">): number | null {
    if (message.firstTokenMs == null || message.firstTokenMs <= 0 || message.promptTokens <= 0) return null;
    return message.promptTokens / (message.firstTokenMs / 1000);
}

export function formatRate(rate: number | null): string {
    return rate == null ? "– tok/s" : `${rate.toFixed(rate < 10 ? 1 : 0)} tok/s`;
}

export function formatTokens(count: number): string {
    return `${count.toLocaleString("en-US")} ${count === 1 ? "token" : "tokens"}`;
}

export function formatBytes(bytes: number): string {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"]; // powers of 1024, named as such
    let value = bytes;
    let unit = 0;
    while (value >= 1024 && unit < units.length - 1) {
        value /= 1024;
        unit++;
    }
    return `${value.toFixed(unit === 0 || value >= 100 ? 0 : 1)} ${units[unit]}`;
}

/** A parameter count as model cards write it: `1.78 B`, `494 M`, `2.4 M`. */
export function formatParameters(count: number): string {
    const [value, unit] =
        count >= 1e9 ? [count / 1e9, "B"] : count >= 1e6 ? [count / 1e6, "M"] : count >= 1e3 ? [count / 1e3, "K"] : [count, ""];
    const digits = unit === "" || value >= 100 ? 0 : value >= 10 ? 1 : 2;
    return `${value.toFixed(digits)}${unit === "" ? "" : ` ${unit}`}`;
}

const months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/** When something last changed, as a list shows it: the time today (`"14:05"`), the day this year (`"Mar 4"`), else `"Mar 4, 2025"`. */
export function formatListDate(ms: number, now: number = Date.now()): string {
    const date = new Date(ms);
    const today = new Date(now);
    if (date.toDateString() === today.toDateString())
        return `${String(date.getHours()).padStart(2, "0")}:${String(date.getMinutes()).padStart(2, "0")}`;
    const day = `${months[date.getMonth()]} ${date.getDate()}`;
    return date.getFullYear() === today.getFullYear() ? day : `${day}, ${date.getFullYear()}`;
}
