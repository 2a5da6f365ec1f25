// llama.cpp's next-token logits after each check's tokens against reference logits (a PyTorch replica's): the largest
// absolute difference, the largest reference logit, and whether both pick the same token. Used by compareLlamaCpp.ts
// (the demo model's training) and scripts/retention/checkLogits.ts (train:retention --check-llama-cpp).
import type {LlamaContext, Token} from "node-llama-cpp";

export type LogitCheck = {tokens: number; maxAbsDiff: number; maxLogit: number; sameArgmax: boolean};

export async function compareLogits(context: LlamaContext, references: Array<{ids: number[]; logits: number[]}>): Promise<LogitCheck[]> {
    const checks: LogitCheck[] = [];
    for (const {ids, logits} of references) {
        const sequence = context.getSequence();
        const input = ids.map((t, i) => (i === ids.length - 1 ? ([t as Token, {generateNext: {logits: true}}] as const) : (t as Token)));
        const evaluated = await sequence.controlledEvaluate(input as never);
        const got = evaluated.at(-1)?.next?.logits;
        if (got == null) throw new Error("no logits returned");
        let maxAbsDiff = 0;
        let argmax = 0;
        for (let t = 0; t < logits.length; t++) {
            const value = got.get(t as Token) ?? NaN;
            maxAbsDiff = Math.max(maxAbsDiff, Math.abs(value - logits[t]!));
            if (value > (got.get(argmax as Token) ?? -Infinity)) argmax = t;
        }
        const refArgmax = logits.indexOf(Math.max(...logits));
        checks.push({tokens: ids.length, maxAbsDiff, maxLogit: Math.max(...logits.map(Math.abs)), sameArgmax: argmax === refArgmax});
        await sequence.dispose();
    }
    return checks;
}
