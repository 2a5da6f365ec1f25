import fs from "node:fs/promises";
import path from "node:path";
import type {LlamaModel} from "node-llama-cpp";
import {writeOwnPrompts} from "./ownPrompts.js";
import {calibrationPrompts, type PromptSet, type SeededPrompt} from "./prompts.js";

/** The prompts a calibration job thinks through and validates on, and the set they came from. */
export type JobPrompts = {set: PromptSet; prompts: SeededPrompt[]; heldOut: SeededPrompt[]};

/**
 * The prompts of a calibration job: its prompt set's, or for `"own"` the questions the model writes itself
 * (`writeOwnPrompts`; the first `prompts` to think through, the next `validationPrompts` held out), kept in the work
 * folder so that a resumed job thinks the same ones. A model that writes too few usable questions gets Ponder's English
 * prompts instead, and the result says so (`set`). For `"file"`, the person's `promptList`: the last
 * `validationPrompts` held out.
 */
export async function jobPrompts(
    model: LlamaModel,
    settings: {promptSet: PromptSet; prompts: number; validationPrompts: number; seed: number; promptList?: string[]},
    work: string,
    options: {threads?: number; signal?: AbortSignal; onLog: (line: string) => void; onProgress: (kept: number, tried: number) => void}
): Promise<JobPrompts> {
    const {promptSet, prompts, validationPrompts, seed} = settings;
    const of = (set: PromptSet): JobPrompts => ({
        set,
        prompts: calibrationPrompts(set, prompts, seed),
        heldOut: calibrationPrompts(set, validationPrompts, seed, true)
    });
    if (promptSet === "file") return fromList(settings.promptList ?? [], prompts, validationPrompts);
    if (promptSet !== "own") return of(promptSet);

    const file = path.join(work, "prompts.json");
    const saved = await fs
        .readFile(file, "utf8")
        .then((text) => JSON.parse(text) as unknown)
        .catch(() => null);
    if (isJobPrompts(saved, prompts, validationPrompts)) return saved;

    const needed = prompts + validationPrompts;
    const written = await writeOwnPrompts(model, needed, {
        seed,
        maxTokens: 512,
        threads: options.threads,
        signal: options.signal,
        onProgress: options.onProgress
    });
    // The questions that ended as a user's turn ends, then as many cut at 512 tokens as are missing (a model trained
    // without the turn's end writes its task's question and goes on); Ponder's English prompts where too few are usable.
    // In the order they were written, so that the held-out ones are as mixed as the others.
    const own = [...written.ended, ...written.unended].slice(0, needed).sort((x, y) => x.seed - y.seed);
    let result: JobPrompts;
    if (own.length < needed) {
        options.onLog(
            `the model wrote ${own.length} usable questions in ${written.tried} tries, ${needed} were needed: Ponder's English prompts instead`
        );
        result = of("english");
    } else {
        const cut = Math.max(0, needed - written.ended.length);
        options.onLog(
            `the model wrote its ${needed} questions in ${written.tried} tries` +
                (cut > 0 ? `, ${cut} of them cut at 512 tokens (not ended)` : "")
        );
        const kept = own.map((prompt) => ({kind: "own", ...prompt}));
        result = {set: "own", prompts: kept.slice(0, prompts), heldOut: kept.slice(prompts)};
    }
    const temp = `${file}.${process.pid}.tmp`;
    await fs.writeFile(temp, JSON.stringify(result));
    await fs.rename(temp, file);
    return result;
}

/** A person's prompts: the last `validationPrompts` held out, up to `prompts` of the others thought through, in order. */
function fromList(list: string[], prompts: number, validationPrompts: number): JobPrompts {
    const thought = Math.min(prompts, list.length - validationPrompts);
    if (thought < 1)
        throw new RangeError(
            `${list.length} prompt${list.length === 1 ? "" : "s"} given: at least ${validationPrompts + 1} are needed (${validationPrompts} held out for the validation)`
        );
    const seeded = list.map((user, index) => ({kind: "file", user, seed: index}));
    return {set: "file", prompts: seeded.slice(0, thought), heldOut: seeded.slice(list.length - validationPrompts)};
}

function isJobPrompts(value: unknown, prompts: number, validationPrompts: number): value is JobPrompts {
    const list = (items: unknown, length: number) =>
        Array.isArray(items) &&
        items.length === length &&
        items.every((item: Partial<SeededPrompt> | null) => typeof item?.user === "string" && typeof item.kind === "string");
    const job = value as Partial<JobPrompts> | null;
    return (job?.set === "own" || job?.set === "english") && list(job.prompts, prompts) && list(job.heldOut, validationPrompts);
}
