// Two greedy generations of one request, on two engine builds, side by side: where their texts part, and their KV
// counters at each memory sample.
import type {KvSample} from "../../preload/contract.js";
import type {GenerationChunk} from "../../main/engine/EngineApi.js";

/** One generation as a comparison needs it: the chunks written and the memory samples. */
export type RecordedRun = {
    chunks: GenerationChunk[];
    samples: KvSample[];
    stopReason: string;
};

export type RunComparison = {
    /**
     * Tokens written before the first character where the runs' texts (thought and answer, each chunk's text
     * concatenated) part, or `null` when both wrote the same text. Chunks carry text and a token count, not token ids:
     * the count is of the tokens in chunks that end before that character in both runs, so it is exact where the chunk
     * holding it has one token and a lower bound otherwise.
     */
    firstDivergence: number | null;
    /** The character where the texts part (in the concatenated text), or `null`. */
    firstDivergentChar: number | null;
    /** Tokens the shorter run wrote. */
    compared: number;
    /** The last sample of each run taken before the first divergence (the last of each when none). */
    before: {a: KvSample | null; b: KvSample | null};
    /** Samples before the first divergence whose live cells, evictions or prune rounds differ between the runs. */
    countersDiffer: number;
};

/** A run's text, each segment opened by a marker, so that the same text in the thought and in the answer differs. */
export function transcript(run: RecordedRun): string {
    let text = "";
    let segment: string | null = null;
    for (const chunk of run.chunks) {
        if (chunk.segment !== segment) {
            segment = chunk.segment;
            text += `\u0000${segment}\u0000`;
        }
        text += chunk.text;
    }
    return text;
}

/** Tokens of `run` in the chunks that end at or before character `at` of its transcript. */
function tokensBefore(run: RecordedRun, at: number): number {
    let end = 0;
    let tokens = 0;
    let segment: string | null = null;
    for (const chunk of run.chunks) {
        if (chunk.segment !== segment) {
            segment = chunk.segment;
            end += `\u0000${segment}\u0000`.length;
        }
        end += chunk.text.length;
        if (end > at) break;
        tokens += chunk.tokens;
    }
    return tokens;
}

/** Where `a` and `b` part, and whether their cells and evictions agreed up to there. */
export function compareRuns(a: RecordedRun, b: RecordedRun): RunComparison {
    const tokensOf = (run: RecordedRun) => run.chunks.reduce((sum, chunk) => sum + chunk.tokens, 0);
    const compared = Math.min(tokensOf(a), tokensOf(b));
    const [textA, textB] = [transcript(a), transcript(b)];
    let firstDivergentChar: number | null = null;
    if (textA !== textB) {
        let i = 0;
        while (i < textA.length && i < textB.length && textA[i] === textB[i]) i++;
        firstDivergentChar = i;
    }
    const firstDivergence =
        firstDivergentChar == null ? null : Math.min(tokensBefore(a, firstDivergentChar), tokensBefore(b, firstDivergentChar));
    // A sample at step s was taken after s tokens of the answer.
    const upTo = firstDivergence ?? Number.POSITIVE_INFINITY;
    const beforeA = a.samples.filter((sample) => sample.step <= upTo);
    const beforeB = b.samples.filter((sample) => sample.step <= upTo);
    const byStep = new Map(beforeB.map((sample) => [sample.step, sample]));
    let countersDiffer = 0;
    for (const sample of beforeA) {
        const other = byStep.get(sample.step);
        if (other == null) continue;
        if (
            other.cellsLive !== sample.cellsLive ||
            other.tokensEvicted !== sample.tokensEvicted ||
            other.pruneRounds !== sample.pruneRounds
        )
            countersDiffer++;
    }
    return {firstDivergence, firstDivergentChar, compared, before: {a: beforeA.at(-1) ?? null, b: beforeB.at(-1) ?? null}, countersDiffer};
}
