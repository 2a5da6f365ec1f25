// Two greedy generations of one request, on two engine builds, side by side: where their tokens part, and their KV
// counters at each memory sample.
import type {KvSample} from "../../preload/contract.js";
import type {GenerationChunk} from "../../main/engine/types.js";

/** One generation as a comparison needs it: the chunks written and the memory samples. */
export type RecordedRun = {
    chunks: GenerationChunk[],
    samples: KvSample[],
    stopReason: string
};

export type RunComparison = {
    /** Tokens written before the first chunk that differs, or `null` when the runs wrote the same chunks. */
    firstDivergence: number | null,
    /** Tokens the shorter run wrote. */
    compared: number,
    /** The last sample of each run taken before the first divergence (the last of each when none). */
    before: {a: KvSample | null, b: KvSample | null},
    /** Samples before the first divergence whose live cells, evictions or prune rounds differ between the runs. */
    countersDiffer: number
};

/** Where `a` and `b` part, and whether their cells and evictions agreed up to there. */
export function compareRuns(a: RecordedRun, b: RecordedRun): RunComparison {
    const tokensOf = (run: RecordedRun) => run.chunks.reduce((sum, chunk) => sum + chunk.tokens, 0);
    const compared = Math.min(tokensOf(a), tokensOf(b));
    let firstDivergence: number | null = null;
    let written = 0;
    for (let i = 0; i < Math.min(a.chunks.length, b.chunks.length); i++) {
        const [x, y] = [a.chunks[i]!, b.chunks[i]!];
        if (x.segment !== y.segment || x.text !== y.text || x.tokens !== y.tokens) {
            firstDivergence = written;
            break;
        }
        written += x.tokens;
    }
    if (firstDivergence == null && a.chunks.length !== b.chunks.length)
        firstDivergence = written;
    // A sample at step s was taken after s tokens of the answer.
    const upTo = firstDivergence ?? Number.POSITIVE_INFINITY;
    const beforeA = a.samples.filter((sample) => sample.step <= upTo);
    const beforeB = b.samples.filter((sample) => sample.step <= upTo);
    const byStep = new Map(beforeB.map((sample) => [sample.step, sample]));
    let countersDiffer = 0;
    for (const sample of beforeA) {
        const other = byStep.get(sample.step);
        if (other == null)
            continue;
        if (other.cellsLive !== sample.cellsLive || other.tokensEvicted !== sample.tokensEvicted || other.pruneRounds !== sample.pruneRounds)
            countersDiffer++;
    }
    return {firstDivergence, compared, before: {a: beforeA.at(-1) ?? null, b: beforeB.at(-1) ?? null}, countersDiffer};
}
