// The `resume` suite: a conversation's next answer from its KV state on disk against the same answer after reading the
// whole history again, each on a fresh engine (a conversation opened again, or Ponder started again).
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type {Llama} from "node-llama-cpp";
import type {BuildInfo, CompressionSettings, PolicyId} from "../../preload/contract.js";
import {Engine} from "../../main/engine/runtime/Engine.js";
import type {ChatTurn, StateFiles} from "../../main/engine/EngineApi.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {median} from "./median.js";
import {table} from "./plot.js";

/** A model and the conversation lengths (in tokens) measured on it. */
export type ResumeModel = {label: string; path: string; lengths: number[]; /** Text repeated to make the first question. */ filler: string};

export type ResumeRow = {
    model: string;
    policy: PolicyId;
    /** The conversation's tokens when the next answer starts (the prompt read by the rebuild). */
    tokens: number;
    cells: number;
    /** Time to the first new token, per repeat: a fresh engine reading the history again, and one loading the state. */
    rebuiltMs: number[];
    resumedMs: number[];
    /** Median rebuilt / median resumed. */
    speedup: number;
    /** Tokens the state held, and those still read after it. */
    stateTokens: number;
    resumedPromptTokens: number;
    fileBytes: number;
    liveBytes: number;
    fullBytes: number;
    /** Whether every resumed answer was token-for-token the rebuilt answer (greedy). */
    identical: boolean;
};

const turnOneTokens = 16;
const answerTokens = 24;

/**
 * For each model, length and policy (Full with every cell; a pruning policy at half the tokens): a first answer on an
 * engine that saves its state, then `repeats` pairs of a fresh engine answering the next question after reading the
 * history again and a fresh engine answering it from the state file, alternated. Times run from the call to the first
 * new token; both engines are loaded (the model read) before the clock starts.
 */
export async function resumeSuite(options: {
    llama: Llama;
    build: BuildInfo;
    models: ResumeModel[];
    policies: PolicyId[];
    threads: number;
    repeats: number;
    onProgress?: (line: string) => void;
}): Promise<{rows: ResumeRow[]; table: string}> {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "ponder-bench-resume-"));
    const rows: ResumeRow[] = [];
    const fresh = async (modelPath: string) => {
        const engine = new Engine({
            loadLlama: async () => ({llama: options.llama, build: options.build}),
            threads: options.threads,
            ownsRuntime: false
        });
        await engine.loadModel(modelPath, null);
        return engine;
    };
    try {
        for (const model of options.models) {
            const probe = await fresh(model.path);
            const measure = async (text: string) =>
                (await probe.countTokens({history: [{role: "user", text}], systemPrompt: ""}))!.promptTokens;
            const perFiller = ((await measure(model.filler.repeat(20))) - (await measure(model.filler.repeat(10)))) / 10;
            const base = (await measure(model.filler)) - perFiller;
            await probe.dispose();
            for (const length of model.lengths) {
                // The first question fills the conversation but for the first answer and the next question.
                const question = model.filler.repeat(Math.max(1, Math.floor((length - base - turnOneTokens - 32) / perFiller)));
                for (const policy of options.policies) {
                    const cells = policy === "full" ? length + 256 : Math.floor(length / 2);
                    const compression: CompressionSettings = {...defaultCompressionSettings, policy};
                    const file = path.join(dir, `${model.label}-${length}-${policy}.state`);
                    const first = await fresh(model.path);
                    const turn1 = await answer(first, compression, cells, [{role: "user", text: question}], turnOneTokens, {
                        load: [],
                        save: file
                    });
                    await first.dispose();
                    const saved = turn1.saved;
                    if (saved == null)
                        throw new Error(`${model.label} ${length} ${policy}: no state was saved (${turn1.note ?? "no reason given"})`);
                    const history: ChatTurn[] = [
                        {role: "user", text: question},
                        {role: "assistant", text: turn1.answer, thinking: turn1.thought},
                        {role: "user", text: "And then?"}
                    ];
                    const row: ResumeRow = {
                        model: model.label,
                        policy,
                        tokens: 0,
                        cells,
                        rebuiltMs: [],
                        resumedMs: [],
                        speedup: 0,
                        stateTokens: saved.tokens,
                        resumedPromptTokens: 0,
                        fileBytes: saved.bytes,
                        liveBytes: saved.liveBytes,
                        fullBytes: saved.fullBytes,
                        identical: true
                    };
                    for (let repeat = 0; repeat < options.repeats; repeat++) {
                        const rebuiltEngine = await fresh(model.path);
                        const rebuilt = await answer(rebuiltEngine, compression, cells, history, answerTokens);
                        await rebuiltEngine.dispose();
                        const resumedEngine = await fresh(model.path);
                        const resumed = await answer(resumedEngine, compression, cells, history, answerTokens, {load: [file]});
                        await resumedEngine.dispose();
                        if (resumed.restored == null)
                            throw new Error(
                                `${model.label} ${length} ${policy}: the state was not loaded (${resumed.note ?? "no reason given"})`
                            );
                        row.tokens = rebuilt.promptLength;
                        row.resumedPromptTokens = resumed.promptTokens;
                        row.rebuiltMs.push(rebuilt.firstTokenMs);
                        row.resumedMs.push(resumed.firstTokenMs);
                        row.identical &&= resumed.text === rebuilt.text;
                        options.onProgress?.(
                            `${model.label} ${length} ${policy} #${repeat + 1}: rebuilt ${rebuilt.firstTokenMs.toFixed(0)} ms, ` +
                                `resumed ${resumed.firstTokenMs.toFixed(0)} ms, same answer: ${String(resumed.text === rebuilt.text)}`
                        );
                    }
                    row.speedup = median(row.rebuiltMs) / median(row.resumedMs);
                    rows.push(row);
                    await fs.rm(file, {force: true});
                }
            }
        }
    } finally {
        await fs.rm(dir, {recursive: true, force: true});
    }
    return {rows, table: resumeTable(rows)};
}

async function answer(
    engine: Engine,
    compression: CompressionSettings,
    cells: number,
    history: ChatTurn[],
    maxTokens: number,
    states?: StateFiles
) {
    let text = "";
    let thought = "";
    let answerText = "";
    let first: number | null = null;
    const started = performance.now();
    const result = await engine.generate({
        history,
        systemPrompt: "",
        temperature: 0,
        seed: 1,
        maxTokens,
        signal: new AbortController().signal,
        kv: {compression, cells},
        states,
        onChunk: (chunk) => {
            first ??= performance.now();
            text += `${chunk.segment}:${chunk.text}|`;
            if (chunk.segment === "thought") thought += chunk.text;
            else answerText += chunk.text;
        }
    });
    // Full KV's state is written after the answer (the app: when the conversation is left), a pruning policy's while its prompt is read.
    const written = result.states?.pending != null ? await engine.saveState(result.states.pending) : null;
    return {
        text,
        thought,
        answer: answerText,
        firstTokenMs: (first ?? performance.now()) - started,
        promptLength: result.promptLength ?? result.promptTokens,
        promptTokens: result.promptTokens,
        saved: written?.saved ?? result.states?.saved ?? null,
        restored: result.states?.restored ?? null,
        note: written?.note ?? result.states?.note ?? null
    };
}

function mib(bytes: number): string {
    return (bytes / 2 ** 20).toFixed(bytes < 10 * 2 ** 20 ? 2 : 1);
}

/** One line per model, length and policy: the two times to the first token, their ratio, the state's size, the answers' match. */
function resumeTable(rows: ResumeRow[]): string {
    return table(
        [
            "model",
            "tokens",
            "policy (cells)",
            "rebuilt TTFT (ms)",
            "resumed TTFT (ms)",
            "rebuilt / resumed",
            "state file (MiB)",
            "live KV (MiB)",
            "Full KV (MiB)",
            "file / Full",
            "tokens read after the state",
            "same answer"
        ],
        rows.map((row) => [
            row.model,
            row.tokens,
            `${row.policy} (${row.cells})`,
            median(row.rebuiltMs).toFixed(0),
            median(row.resumedMs).toFixed(0),
            `${row.speedup.toFixed(1)}×`,
            mib(row.fileBytes),
            mib(row.liveBytes),
            mib(row.fullBytes),
            row.fullBytes > 0 ? (row.fileBytes / row.fullBytes).toFixed(2) : "–",
            row.resumedPromptTokens,
            row.identical ? "yes" : "NO"
        ])
    );
}
