import {resolveChatWrapper, type ChatWrapper, type LlamaModel, type Token} from "node-llama-cpp";

// Calibration prompts a model writes itself: the user turn of its chat template sampled from the model, as Magpie
// (Xu et al., 2024, §2.1) draws instructions from an aligned model given nothing but the template up to the user's
// text. A model trained on one task writes that task's questions, so its gates are calibrated on what it will be asked,
// with no prompt set made for it. Departures: the temperature is 0.7, not 1 (the option's comment), and a question the model
// does not end (Ponder's task models were trained without the turn's end) is kept cut at `maxTokens`, for the caller
// to use where too few end (`jobPrompts`, which turns to Ponder's English prompts where too few are usable).

export type OwnPromptsOptions = {
    /** Seed of the sampling: the same model, seed and build write the same prompts. */
    seed: number;
    /**
     * Which draw of the seed: each draw samples apart from the others (a job's questions to think through are draw 0,
     * its held-out ones draw 1, so the validation never measures on the draw the gates were fitted to). Defaults to `0`.
     */
    draw?: number;
    /** Sampling temperature (docs/BENCHMARKS.md compares 0.5, 0.7 and Magpie's 1 on the task models). Defaults to `0.7`. */
    temperature?: number;
    /** Longest question, in tokens: a sample that has not ended the user's turn by then is cut there (`unended`). Defaults to `384`. */
    maxTokens?: number;
    /** Samples tried per prompt wanted before giving up. Defaults to `3`. */
    triesPerPrompt?: number;
    threads?: number;
    signal?: AbortSignal;
    /** After each sample: usable questions so far (at most `count`), and samples tried. */
    onProgress?: (kept: number, tried: number) => void;
};

/** A question the model wrote, with the seed of its sample. */
export type OwnPrompt = {user: string; seed: number};

/**
 * Questions the model wrote, at most `count` of each kind, distinct: `ended` the ones it ended as a user's turn ends,
 * `unended` the ones cut at `maxTokens` (a model trained without the turn's end, as Ponder's task models are, writes its
 * task's question and goes on). It stops once `count` ended ones are written, or once `count` samples have ended
 * fewer than one in ten and `count` unended ones are written, or after `count` x `triesPerPrompt` samples.
 */
export async function writeOwnPrompts(
    model: LlamaModel,
    count: number,
    options: OwnPromptsOptions
): Promise<{ended: OwnPrompt[]; unended: OwnPrompt[]; tried: number}> {
    const maxTokens = options.maxTokens ?? 384;
    const temperature = options.temperature ?? 0.7;
    const tries = count * (options.triesPerPrompt ?? 3);
    const turn = userTurn(model, resolveChatWrapper(model));
    const context = await model.createContext({
        contextSize: turn.prefix.length + maxTokens + 8,
        threads: options.threads ?? 1,
        sequences: 1,
        flashAttention: false
    });
    const ended: OwnPrompt[] = [];
    const unended: OwnPrompt[] = [];
    let tried = 0;
    const done = () => ended.length >= count || tried >= tries || (tried >= count && ended.length < tried / 10 && unended.length >= count);
    try {
        const sequence = context.getSequence();
        while (!done()) {
            options.signal?.throwIfAborted();
            await sequence.clearHistory();
            const tokens: Token[] = [];
            let end = false;
            const seed = options.seed * 1_000_003 + (options.draw ?? 0) * 100_000 + tried;
            const generator = sequence.evaluate(turn.prefix, {temperature, seed, yieldEogToken: true});
            try {
                for await (const token of generator) {
                    // the turn's end, or any control token (a turn's or a thought's marker): the user's text is over
                    if (token === turn.end || model.isSpecialToken(token)) {
                        end = true;
                        break;
                    }
                    tokens.push(token);
                    if (tokens.length >= maxTokens) break;
                }
            } finally {
                await generator.return(undefined);
            }
            tried++;
            const text = model.detokenize(tokens).trim();
            const kept = end ? ended : unended;
            if (isUsable(text) && kept.length < count && !kept.some((prompt) => prompt.user === text)) kept.push({user: text, seed});
            options.onProgress?.(Math.min(count, ended.length + unended.length), tried);
        }
    } finally {
        await context.dispose();
    }
    return {ended, unended, tried};
}

/**
 * Why a draw of questions is noise rather than questions, in words; `null` when it reads as questions. Noise: most of
 * them made of one or two distinct words, or looping (fewer than a third of their 4-character pieces distinct: a model
 * that never ends a question repeats itself).
 */
export function questionNoise(questions: readonly string[]): string | null {
    if (questions.length === 0) return "no questions";
    const noisy = questions.filter((question) => {
        const words = new Set(
            question
                .toLowerCase()
                .split(/[^\p{L}\p{N}]+/u)
                .filter((word) => word !== "")
        );
        const pieces = Math.max(1, question.length - 3);
        const distinct = new Set(Array.from({length: pieces}, (_, i) => question.slice(i, i + 4))).size;
        return words.size < 3 || distinct / pieces < 1 / 3;
    });
    if (noisy.length * 2 > questions.length)
        return `${noisy.length} of the ${questions.length} questions it wrote are one or two words, or the same text looping`;
    return null;
}

/** A question worth thinking about: some visible text, not one character repeated, no replacement characters. */
function isUsable(text: string): boolean {
    return text.length >= 8 && new Set(text).size >= 4 && !text.includes("\uFFFD");
}

/**
 * The template's tokens up to a user's text (`prefix`) and the first token after it (`end`, where the model ends the
 * user's turn): two renderings of one user message that differ only in its text, compared from each end.
 */
export function userTurn(model: LlamaModel, chatWrapper: ChatWrapper): {prefix: Token[]; end: Token} {
    const render = (text: string) =>
        chatWrapper
            .generateContextState({
                chatHistory: [
                    {type: "user", text},
                    {type: "model", response: []}
                ]
            })
            .contextText.tokenize(model.tokenizer);
    const a = render("x");
    const b = render("y");
    let prefix = 0;
    while (prefix < a.length && prefix < b.length && a[prefix] === b[prefix]) prefix++;
    let suffix = 0;
    while (suffix < a.length - prefix && suffix < b.length - prefix && a[a.length - 1 - suffix] === b[b.length - 1 - suffix]) suffix++;
    const end = a[a.length - suffix];
    if (prefix === 0 || suffix === 0 || end == null) throw new Error("The chat template's user turn could not be found");
    return {prefix: a.slice(0, prefix), end};
}
