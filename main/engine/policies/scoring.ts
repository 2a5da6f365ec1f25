import type {CompressionSettings} from "../../../preload/contract/compression.js";
import {isTunable} from "../../../preload/policyCatalogue.js";
import {policies} from "./index.js";
import type {ScoreNeeds} from "./types.js";

/** The parameters of the compression's policy (none for Full and TRIM-KV). */
export function policyParams(compression: Pick<CompressionSettings, "policy" | "params">): unknown {
    return isTunable(compression.policy) ? compression.params[compression.policy] : {};
}

/** What the compression's policy reads at a prune round (`Policy.needs`). */
export function policyNeeds(compression: Pick<CompressionSettings, "policy" | "params">): ScoreNeeds {
    const policy = policies[compression.policy] as unknown as {needs(params: unknown): ScoreNeeds};
    return policy.needs(policyParams(compression));
}

/** Query rows scored per ubatch when a policy sums over queries (Eq. 2/5): every row of a ubatch without flash attention. */
const allRows = 512;
/**
 * With flash attention the scored rows are recomputed beside the kernel (or, on the CPU, written out by it); bounded so
 * a prefill stays cheap, unless the policy needs every row (`ScoreNeeds.everyRow`).
 */
const allRowsFlash = 32;

/**
 * The attention scoring a compression setting turns on: none for the policies that read no scores (Full, StreamingLLM,
 * TRIM-KV: positions are read with scoring off), every row of a ubatch (bounded with flash attention) for the policies that
 * sum over queries, the last w rows for LAVa (within the same bound), the last row otherwise. `rows` is 0 when scoring is off.
 */
export function scoring(compression: Pick<CompressionSettings, "policy" | "flashAttention" | "params">): {rows: number; gamma: number} {
    const needs = policyNeeds(compression);
    if (needs.scores === false) return {rows: 0, gamma: 1};
    const bound = !needs.allRows ? 1 : compression.flashAttention && needs.everyRow !== true ? allRowsFlash : allRows;
    // A policy's own count (LAVa's window) within the same bound.
    const rows = needs.rows == null ? bound : Math.max(1, Math.min(needs.rows, bound));
    return {rows, gamma: needs.gamma ?? 1};
}
