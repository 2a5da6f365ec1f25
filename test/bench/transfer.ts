// Gates that carry to tasks they never saw: the many-task model calibrated by the app's calibration on some of its
// families, and every policy measured on the families held out of the calibration and on the calibrated ones.
import {existsSync} from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import type {Llama} from "node-llama-cpp";
import {z} from "zod";
import type {PolicyId} from "../../preload/contract.js";
import {calibrateRetention} from "../../main/engine/calibration/calibrateRetention.js";
import {multiTaskPrompts} from "../../main/engine/calibration/prompts.js";
import {retentionSidecarPath} from "../../main/engine/retention/findRetentionGates.js";
import {MULTI_FAMILIES, type MultiFamily} from "../../main/demo/multiTask.js";
import {answerPrompts} from "../../scripts/calibration/answerPrompts.js";
import {qualitySuite, type FullRun} from "./quality.js";
import {table} from "./plot.js";

/**
 * Where a calibration's texts come from: the model's own questions (`own`, the app's default for a model it does not
 * know), a prompts file of the calibrated families' training problems (`prompts`), or the model's own answers to them,
 * read back at prompt speed (`traces`, as a calibration from stored conversations reads).
 */
export type TransferSource = "own" | "prompts" | "traces";
export const transferSources: TransferSource[] = ["own", "prompts", "traces"];

/** One quality row of one family's set: a policy (TRIM-KV with the gates of a source) at a share of Full's cells. */
export type TransferRow = {family: MultiFamily; policy: string; share: number; accuracy: number; thoughtExact: number | null};

/** What a source's calibration did: its gates installed beside the model's copy, or refused by its validation. */
export type TransferCalibration = {source: TransferSource; installed: boolean; prompts: number; seconds: number; note: string};

/**
 * The held-out-family table: per policy (TRIM-KV once per gate source) and share, the mean over the held-out families'
 * sets and over the calibrated families' sets of the right answers and of the thoughts identical to Full's.
 */
export function transferTable(rows: TransferRow[], heldOut: readonly MultiFamily[], shares: number[]): string {
    const policies = [...new Set(rows.filter((row) => row.policy !== "full").map((row) => row.policy))];
    const cell = (policy: string, share: number, held: boolean) => {
        const chosen = rows.filter((row) => row.policy === policy && row.share === share && heldOut.includes(row.family) === held);
        if (chosen.length === 0) return "-";
        const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;
        const exact = chosen.map((row) => row.thoughtExact).filter((value): value is number => value != null);
        return `${mean(chosen.map((row) => row.accuracy)).toFixed(3)}` + (exact.length > 0 ? ` (${mean(exact).toFixed(3)})` : "");
    };
    const percent = (share: number) => `${Math.round(share * 100)}%`;
    return table(
        ["policy", ...shares.map((share) => `held out, ${percent(share)}`), ...shares.map((share) => `calibrated, ${percent(share)}`)],
        [
            ["full", ...[true, false].flatMap((held) => shares.map(() => cell("full", 1, held)))],
            ...policies.map((policy) => [
                policy,
                ...shares.map((share) => cell(policy, share, true)),
                ...shares.map((share) => cell(policy, share, false))
            ])
        ]
    );
}

/**
 * Calibrates the many-task model (`modelPath`) once per source on the families not in `heldOut` (training seeds; the
 * calibration's validation holds out the last of its own prompts), each into a copy of the model in `workDir`, and runs
 * the quality suite on every family's held-out set: the attention-history policies once on the model, TRIM-KV on each
 * copy with its gates (`auto`: per-head cells for gates fitted per head). A source whose gates the validation refuses
 * gets no rows, and its note says why.
 */
export async function transferSuite(options: {
    llama: Llama;
    modelPath: string;
    heldOut: MultiFamily[];
    sources: TransferSource[];
    policies: PolicyId[];
    budgets: number[];
    problems: number;
    threads: number;
    /** Calibration prompts (of which the calibration's validation holds out its default share). */
    calibrationPrompts: number;
    /** Where the model's copies and their calibrations' work are kept: the same folder goes on from them. */
    workDir: string;
    /**
     * A file the suite writes after every family's set and every calibration, and goes on from when it names the same
     * run (model, families, sources, policies, budgets, problems, prompts): a run of hours survives a stop.
     */
    progressFile?: string;
    onProgress?: (line: string) => void;
}) {
    const say = options.onProgress ?? (() => undefined);
    const config = JSON.stringify({
        model: path.resolve(options.modelPath),
        bytes: (await fs.stat(options.modelPath)).size,
        heldOut: options.heldOut,
        sources: options.sources,
        policies: options.policies,
        budgets: options.budgets,
        problems: options.problems,
        calibrationPrompts: options.calibrationPrompts
    });
    type Progress = {
        config: string;
        sets: Record<string, TransferRow[]>;
        calibrations: TransferCalibration[];
        /** Full's runs per family, from the first set that ran them: the later sets compare with them, not run Full again. */
        full?: Record<string, FullRun[]>;
    };
    const progress: Progress = await readProgress(options.progressFile, config);
    const save = async () => {
        if (options.progressFile != null) await fs.writeFile(options.progressFile, JSON.stringify(progress));
    };
    if (options.heldOut.length === 0 || options.heldOut.length >= MULTI_FAMILIES.length)
        throw new Error(`hold out at least one family and keep at least one to calibrate on, of ${MULTI_FAMILIES.join(", ")}`);
    const calibrated = MULTI_FAMILIES.filter((family) => !options.heldOut.includes(family));
    const families = [...options.heldOut, ...calibrated];
    const quality = async (modelPath: string, policies: PolicyId[], label: (policy: string) => string, group: string) => {
        for (const family of families) {
            const key = `${group}:${family}`;
            if (progress.sets[key] != null) {
                say(`${family}: ${group} measured before (${options.progressFile})`);
                continue;
            }
            const rows: TransferRow[] = [];
            const report = await qualitySuite({
                llama: options.llama,
                modelPath,
                policies,
                budgets: options.budgets,
                problems: options.problems,
                threads: options.threads,
                fidelityProblems: 0,
                set: `multi-${family}`,
                fullRuns: progress.full?.[family],
                onProgress: (line) => say(`${family} ${line}`)
            });
            for (const row of report.rows) {
                if (row.policy === "refreekv (paper)") continue;
                rows.push({
                    family,
                    policy: row.policy === "full" ? "full" : label(row.policy),
                    share: row.share,
                    accuracy: row.accuracy,
                    thoughtExact: row.thoughtExact
                });
            }
            progress.sets[key] = rows;
            progress.full = {...progress.full, [family]: report.fullRuns};
            await save();
        }
    };

    const history = options.policies.filter((policy) => policy !== "trimkv");
    if (history.length > 0) await quality(options.modelPath, history, (policy) => policy, "history");

    if (options.policies.includes("trimkv")) {
        const prompts = multiTaskPrompts(options.calibrationPrompts, 0, false, calibrated).map((prompt) => prompt.user);
        for (const source of options.sources) {
            const dir = path.join(options.workDir, source);
            const copy = path.join(dir, path.basename(options.modelPath));
            const known = progress.calibrations.find((c) => c.source === source);
            if (known != null && (!known.installed || existsSync(retentionSidecarPath(copy)))) {
                say(`calibration (${source}): made before (${known.note})`);
                if (known.installed) await quality(copy, ["trimkv"], (policy) => `${policy} (${source})`, source);
                continue;
            }
            progress.calibrations = progress.calibrations.filter((c) => c.source !== source);
            await fs.mkdir(dir, {recursive: true});
            await fs.copyFile(options.modelPath, copy);
            const model = await options.llama.loadModel({modelPath: copy});
            let result;
            try {
                const texts =
                    source === "traces"
                        ? await answerPrompts(model, prompts, {
                              maxTokens: 2048,
                              threads: options.threads,
                              onAnswer: (index) => say(`traces: answered ${index + 1}/${prompts.length}`)
                          })
                        : undefined;
                result = await calibrateRetention({
                    model,
                    modelPath: copy,
                    promptSet: source === "own" ? "own" : source === "prompts" ? "file" : "traces",
                    promptList: source === "prompts" ? prompts : undefined,
                    texts,
                    prompts: source === "own" ? options.calibrationPrompts : undefined,
                    threads: options.threads,
                    workDir: path.join(dir, "work"),
                    onProgress: (p) => p.done === p.total && say(`calibration (${source}): ${p.stage} done`)
                });
            } finally {
                await model.dispose();
            }
            progress.calibrations.push({
                source,
                installed: result.installed,
                prompts: result.prompts,
                seconds: result.seconds,
                note: result.installed ? `gates installed (${result.promptSet})` : (result.refusal ?? "refused")
            });
            await save();
            say(`calibration (${source}): ${progress.calibrations.at(-1)!.note}`);
            if (result.installed) await quality(copy, ["trimkv"], (policy) => `${policy} (${source})`, source);
        }
    }
    // Full once per family (every set has its row, from the same runs)
    const rows = Object.values(progress.sets)
        .flat()
        .filter(
            (row, index, all) =>
                row.policy !== "full" || all.findIndex((other) => other.policy === "full" && other.family === row.family) === index
        );
    const calibrations = options.sources.flatMap((source) => progress.calibrations.filter((c) => c.source === source));

    // The model's own questions are of every family it knows: that source holds nothing out.
    const own = options.sources.includes("own")
        ? ` The model's own questions (gates from "own") are of every family it knows, the held-out ones included.`
        : "";
    const markdown =
        `Held out of the prompts file and the read answers: ${options.heldOut.join(", ")}; calibrated on: ${calibrated.join(", ")} ` +
        `(${options.calibrationPrompts} training problems). Right answers (thoughts identical to Full's), the mean over each group's ` +
        `families, ${options.problems} held-out problems per family.${own}\n\n` +
        transferTable(rows, options.heldOut, options.budgets) +
        "\n\n" +
        table(
            ["gates from", "installed", "prompts", "seconds", "note"],
            calibrations.map((c) => [c.source, c.installed ? "yes" : "no", String(c.prompts), c.seconds.toFixed(0), c.note])
        );
    return {json: {heldOut: options.heldOut, calibrated, calibrations, rows}, markdown};
}

/** The progress of an earlier run of the same configuration, else a fresh one. */
async function readProgress(file: string | undefined, config: string) {
    const fresh = {config, sets: {}, calibrations: []};
    if (file == null || !existsSync(file)) return fresh;
    try {
        const saved = JSON.parse(await fs.readFile(file, "utf8")) as {
            config?: unknown;
            sets?: unknown;
            calibrations?: unknown;
            full?: unknown;
        };
        if (saved.config !== config || typeof saved.sets !== "object" || saved.sets == null || !Array.isArray(saved.calibrations))
            return fresh;
        return {
            config,
            sets: saved.sets as Record<string, TransferRow[]>,
            calibrations: saved.calibrations as TransferCalibration[],
            full: fullRunsOf(saved.full)
        };
    } catch {
        return fresh;
    }
}

const fullRunsSchema = z.array(z.object({cells: z.number().int().positive(), thought: z.string(), correct: z.boolean()})).nonempty();

/** Saved runs of Full per family, the families whose runs are whole (and not none); none when the record is not an object. */
export function fullRunsOf(saved: unknown): Record<string, FullRun[]> | undefined {
    if (typeof saved !== "object" || saved == null) return undefined;
    return Object.fromEntries(
        Object.entries(saved).flatMap(([family, runs]) => {
            const parsed = fullRunsSchema.safeParse(runs);
            return parsed.success ? [[family, parsed.data]] : [];
        })
    );
}
