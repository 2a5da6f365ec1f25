import type {CompressionSettings} from "../../preload/contract.js";
import {policies} from "./policies/index.js";
import type {ScoreNeeds} from "./policies/types.js";

/** Query rows scored per ubatch when a policy sums over queries (Eq. 2/5): every row of a ubatch without flash attention. */
const allRows = 512;
/**
 * With flash attention the scored rows are recomputed beside the kernel (or, on the CPU, written out by it); bounded so
 * a prefill stays cheap, unless the policy needs every row (`ScoreNeeds.everyRow`).
 */
const allRowsFlash = 32;

/**
 * The attention scoring a compression setting turns on: none for Full and StreamingLLM (positions are read with
 * scoring off), every row of a ubatch (bounded with flash attention) for the policies that sum over queries, the last
 * row otherwise. `rows` is 0 when scoring is off.
 */
export function scoring(compression: Pick<CompressionSettings, "policy" | "flashAttention" | "params">): {rows: number, gamma: number} {
    if (compression.policy === "full" || compression.policy === "streamingllm")
        return {rows: 0, gamma: 1};
    const policy = policies[compression.policy] as unknown as {needs(params: unknown): ScoreNeeds};
    const needs = policy.needs(compression.params[compression.policy]);
    const rows = !needs.allRows ? 1 : compression.flashAttention && needs.everyRow !== true ? allRowsFlash : allRows;
    return {rows, gamma: needs.gamma ?? 1};
}
