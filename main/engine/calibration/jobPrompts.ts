import fs from "node:fs/promises";
import path from "node:path";
import type {LlamaModel} from "node-llama-cpp";
import {questionNoise, writeOwnPrompts} from "./ownPrompts.js";
import {calibrationPrompts, type PromptSet, type SeededPrompt} from "./prompts.js";

/** The prompts a calibration job thinks through and validates on, and the set they came from. */
export type JobPrompts = {set: PromptSet; prompts: SeededPrompt[]; heldOut: SeededPrompt[]};

/**
 * The prompts of a calibration job: its prompt set's, or for `"own"` the questions the model writes itself
 * (`writeOwnPrompts`; the `prompts` to think through from one draw, the `validationPrompts` held out from another),
 * kept in the work folder so that a resumed job thinks the same ones. A model that writes too few usable questions gets Ponder's English
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

    // Two draws: the questions to think through, and apart from them the held-out ones, so the validation never
    // measures on the draw the gates were fitted to. In each, the questions the model ended as a user's turn ends, then
    // as many cut at 512 tokens as are missing (a model trained without the turn's end writes its task's question and
    // goes on), in the order they were written; Ponder's English prompts where too few are usable, or they are noise.
    const draw = async (count: number, index: number, done: number) => {
        const written = await writeOwnPrompts(model, count, {
            seed,
            draw: index,
            maxTokens: 512,
            threads: options.threads,
            signal: options.signal,
            onProgress: (kept, tried) => options.onProgress(done + kept, tried)
        });
        const own = [...written.ended, ...written.unended].slice(0, count).sort((x, y) => x.seed - y.seed);
        return {own, tried: written.tried, cut: Math.max(0, own.length - written.ended.length)};
    };
    const train = await draw(prompts, 0, 0);
    const heldOut = train.own.length < prompts ? null : await draw(validationPrompts, 1, prompts);
    const noise = heldOut == null ? null : questionNoise([...train.own, ...heldOut.own].map((prompt) => prompt.user));
    let result: JobPrompts;
    if (heldOut == null || heldOut.own.length < validationPrompts) {
        const wrote = train.own.length + (heldOut?.own.length ?? 0);
        options.onLog(
            `the model wrote ${wrote} usable questions in ${train.tried + (heldOut?.tried ?? 0)} tries, ${prompts + validationPrompts} were needed: Ponder's English prompts instead`
        );
        result = of("english");
    } else if (noise != null) {
        options.onLog(`the questions the model wrote look like noise (${noise}): Ponder's English prompts instead`);
        result = of("english");
    } else {
        const cut = train.cut + heldOut.cut;
        options.onLog(
            `the model wrote its ${prompts + validationPrompts} questions in ${train.tried + heldOut.tried} tries, the held-out ones in a draw of their own` +
                (cut > 0 ? `, ${cut} of them cut at 512 tokens (not ended)` : "")
        );
        const kept = (list: typeof train.own) => list.map((prompt) => ({kind: "own", ...prompt}));
        result = {set: "own", prompts: kept(train.own), heldOut: kept(heldOut.own)};
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
