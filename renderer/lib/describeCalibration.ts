import type {CalibrationPoint, CalibrationProvenance, CalibrationStatus} from "../../preload/contract.js";
import {count} from "./formatMemory.js";

/** A duration for a person: "40 s", "9 min", "1 h 5 min". */
export function formatDuration(seconds: number): string {
    const s = Math.max(0, Math.round(seconds));
    if (s < 60) return `${s} s`;
    const minutes = Math.round(s / 60);
    return minutes < 60 ? `${minutes} min` : `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/** A running calibration's line: its stage and step, and the time it still needs ("Thinking 3/8 · about 4 min left"). */
export function describeCalibrationProgress(status: CalibrationStatus): string {
    const left = status.etaSeconds == null ? "estimating the time left" : `about ${formatDuration(status.etaSeconds)} left`;
    const resumed = status.resumed > 0 ? ` · went on from ${status.resumed} prompt${status.resumed === 1 ? "" : "s"} thought before` : "";
    return `${status.message} · ${left}${resumed}`;
}

/**
 * The share of the job done, for the progress bar: the thinking, then the training, then the validation, a third each (a
 * model's own questions, written before it thinks, stay at the start).
 */
export function calibrationFraction(status: CalibrationStatus): number {
    const within = status.of > 0 ? Math.min(1, status.step / status.of) : 0;
    const base = {starting: 0, questions: 0, thinking: 0, reading: 0, training: 1, validating: 2, writing: 3}[status.stage];
    return Math.min(1, (base + (status.stage === "writing" || status.stage === "questions" ? 0 : within)) / 3);
}

/** What the model thought about, by the calibration's prompt set. */
const promptSetWords: Record<string, string> = {
    own: "on questions it wrote itself",
    english: "on Ponder's English prompts",
    demo: "on its task's problems",
    merge: "on its task's problems",
    multi: "on its tasks' problems",
    file: "on prompts from a file",
    conversations: "read from your conversations with it",
    traces: "read from a trace file: if another model wrote it, its text is another distribution than this model's own"
};

/**
 * What a calibration made, in numbers: "Calibrated on 38 thoughts (on Ponder's English prompts), 51,200 tokens, 9 min; held-out agreement at 25%:
 * 0.97, Lethe 0.86 (answers 0.90, Lethe 0.40); at 50%: 0.99, Lethe 0.95 (answers 1.00, Lethe 0.60)"; the answers' part
 * only where held-out answers were reached.
 */
export function describeCalibrationResult(provenance: CalibrationProvenance): string {
    const about = promptSetWords[provenance.promptSet];
    const texts = provenance.texts;
    const lengths =
        texts == null
            ? ""
            : `, texts of ${count(texts.mean)} tokens on average (longest ${count(texts.longest)}${texts.cut > 0 ? `; ${count(texts.cut)} cut at the limit` : ""})`;
    const made = `Calibrated on ${count(provenance.prompts)} thought${provenance.prompts === 1 ? "" : "s"}${about == null ? "" : ` (${about})`}, ${count(provenance.tokens)} tokens${lengths}, ${formatDuration(provenance.seconds)}`;
    const points = provenance.validation?.points ?? [];
    if (points.length === 0) return made;
    const answers = (p: CalibrationPoint) =>
        p.answers == null ? "" : ` (answers ${p.answers.gates.toFixed(2)}, Lethe ${p.answers.lethe.toFixed(2)})`;
    return `${made}; held-out agreement ${points.map((p) => `at ${Math.round(p.share * 100)}%: ${p.gates.toFixed(2)}, Lethe ${p.lethe.toFixed(2)}${answers(p)}`).join("; ")}`;
}
