import {resolveChatWrapper, type Llama, type Token} from "node-llama-cpp";
import {fullTrace} from "../../main/engine/generation/fidelity.js";
import {table} from "./plot.js";
import {problemSets} from "./quality.js";

/** A read: one head of one layer puts at least this share of its attention on the cell. */
const sharpRead = 0.5;
/** "Later": more than this many tokens after the cell was written (or, for a question cell, into the answer). */
const later = 64;
/** What a policy has seen of a generated cell when it first decides on it: the first two prune rounds. */
const early = 16;

type ForesightRow = {
    /** What ranks the cells: the attention they received so far, or the learned gates' log beta (TRIM-KV). */
    signal: "attention received" | "retention gates";
    cells: "question" | "generated";
    needed: number;
    notNeeded: number;
    neededMedian: number;
    notNeededMedian: number;
    /** Share of (needed, not needed) pairs in which the needed cell had received more attention (ties count half). */
    auc: number;
};

/**
 * What attention history can tell about the future, along Full's greedy traces (no eviction): do the cells the chain
 * of thought reads later receive more attention beforehand than the cells it never reads again? Every eviction policy
 * here (H2O, RASR, ReFreeKV's last row) ranks by that history, so where it cannot tell them apart, no ranking by it
 * can keep the right cells; only foresight (the oracle) can.
 */
export async function foresightSuite(options: {
    llama: Llama;
    modelPath: string;
    problems: number;
    threads: number;
    set: keyof typeof problemSets;
    /** A retention gate file for the model: adds the gates' rows (log beta when the cell is written, nothing seen yet). */
    retention?: string;
    onProgress?: (line: string) => void;
}) {
    const set = problemSets[options.set]!;
    const model = await options.llama.loadModel({modelPath: options.modelPath});
    const samples = emptySamples();
    const gateSamples = emptySamples();
    try {
        const wrapper = resolveChatWrapper(model);
        for (const [index, problem] of set.problems(options.problems).entries()) {
            const prompt: Token[] = wrapper
                .generateContextState({
                    chatHistory: [
                        {type: "user", text: problem.question},
                        {type: "model", response: [{type: "segment", segmentType: "thought", text: "", ended: false}]}
                    ]
                })
                .contextText.tokenize(model.tokenizer);
            const trace = await fullTrace(model, prompt, 4096, options.threads, {
                attention: true,
                stop: (token) => model.isEogToken(token),
                retention: options.retention
            });
            collect(trace.sharpest!, prompt.length, samples);
            if (trace.logBeta != null) collect(trace.sharpest!, prompt.length, gateSamples, (position) => trace.logBeta![position]!);
            options.onProgress?.(
                `problem ${index + 1}/${options.problems}: ${prompt.length}-token question, ${trace.tokens.length} tokens`
            );
        }
    } finally {
        await model.dispose();
    }
    const rowsOf = (signal: ForesightRow["signal"], from: Samples) =>
        (["question", "generated"] as const).map((cells): ForesightRow => {
            const {needed, notNeeded} = from[cells];
            return {
                signal,
                cells,
                needed: needed.length,
                notNeeded: notNeeded.length,
                neededMedian: quantile(needed, 0.5),
                notNeededMedian: quantile(notNeeded, 0.5),
                auc: pairwiseAuc(needed, notNeeded)
            };
        });
    const rows = [...rowsOf("attention received", samples), ...(options.retention != null ? rowsOf("retention gates", gateSamples) : [])];
    return {
        rows,
        title: set.title,
        table: table(
            ["signal", "cells", "read later (n)", "not read later (n)", "signal, read later (median)", "not read later (median)", "AUC"],
            rows.map((row) => [
                row.signal === "retention gates"
                    ? "retention gates (max log beta over layers and KV heads, at writing)"
                    : "attention received",
                row.cells === "question"
                    ? `question: first read more than ${later} tokens into the answer, or never; largest one-head weight over the first ${later} tokens`
                    : `generated: read again more than ${later} tokens after being written, or not; one-head weights summed over the ${early} tokens after it`,
                row.needed,
                row.notNeeded,
                row.neededMedian.toFixed(3),
                row.notNeededMedian.toFixed(3),
                row.auc.toFixed(3)
            ])
        )
    };
}

/**
 * `sharpest[r]` is the largest one-head weight the query at position `promptLength + r` gave each earlier position.
 * Each cell's sample is the attention it received so far, or `signal(position)` when given (the gates' log beta).
 * Question cells (after the first, the sequence start) are split by whether they are first read more than `later`
 * tokens into the answer or never; generated cells by whether they are read again more than `later` tokens after
 * being written (cells written too close to the end to tell are left out).
 */
export function collect(sharpest: Float32Array[], promptLength: number, into: Samples, signal?: (position: number) => number) {
    const rows = sharpest.length;
    const weight = (r: number, position: number) => sharpest[r]![position] ?? 0;
    if (rows > later) {
        for (let position = 1; position < promptLength; position++) {
            let firstRead = -1;
            for (let r = 0; r < rows && firstRead < 0; r++) {
                if (weight(r, position) >= sharpRead) firstRead = r;
            }
            if (firstRead >= 0 && firstRead < later) continue;
            let seen = 0;
            for (let r = 0; r < later; r++) seen = Math.max(seen, weight(r, position));
            (firstRead >= later ? into.question.needed : into.question.notNeeded).push(signal?.(position) ?? seen);
        }
    }
    for (let written = 0; written + later < rows; written++) {
        const position = promptLength + written;
        let seen = 0;
        for (let r = written + 1; r <= written + early; r++) seen += weight(r, position);
        let readLater = false;
        for (let r = written + later + 1; r < rows && !readLater; r++) readLater = weight(r, position) >= sharpRead;
        (readLater ? into.generated.needed : into.generated.notNeeded).push(signal?.(position) ?? seen);
    }
}

type Samples = {question: {needed: number[]; notNeeded: number[]}; generated: {needed: number[]; notNeeded: number[]}};

function emptySamples(): Samples {
    return {question: {needed: [], notNeeded: []}, generated: {needed: [], notNeeded: []}};
}

/** The probability that a value drawn from `a` exceeds one drawn from `b` (ties count half): Mann-Whitney's AUC. */
export function pairwiseAuc(a: number[], b: number[]): number {
    if (a.length === 0 || b.length === 0) return Number.NaN;
    const all = [...a.map((value) => ({value, first: true})), ...b.map((value) => ({value, first: false}))].sort(
        (x, y) => x.value - y.value
    );
    let rankSum = 0;
    for (let i = 0; i < all.length;) {
        let j = i;
        while (j < all.length && all[j]!.value === all[i]!.value) j++;
        const rank = (i + j + 1) / 2;
        for (let k = i; k < j; k++) {
            if (all[k]!.first) rankSum += rank;
        }
        i = j;
    }
    return (rankSum - (a.length * (a.length + 1)) / 2) / (a.length * b.length);
}

function quantile(values: number[], q: number): number {
    if (values.length === 0) return Number.NaN;
    const sorted = [...values].sort((x, y) => x - y);
    return sorted[Math.floor((sorted.length - 1) * q)]!;
}
