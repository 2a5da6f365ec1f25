import type {CompressionSettings} from "../../preload/contract.js";
import {policies} from "./policies/index.js";

/** Query rows scored per ubatch when a policy sums over queries (Eq. 2/5): every row of a ubatch without flash attention. */
const allRows = 512;
/** With flash attention the scored rows are recomputed beside the kernel; bounded so a prefill stays cheap. */
const allRowsFlash = 32;

/**
 * The attention scoring a compression setting turns on: none for Full and StreamingLLM (positions are read with
 * scoring off), every row of a ubatch (bounded with flash attention) for the policies that sum over queries, the last
 * row otherwise. `rows` is 0 when scoring is off.
 */
export function scoring(compression: Pick<CompressionSettings, "policy" | "flashAttention" | "params">): {rows: number, gamma: number} {
    if (compression.policy !== "h2o" && compression.policy !== "lethe" && compression.policy !== "refreekv")
        return {rows: 0, gamma: 1};
    const policy = policies[compression.policy] as unknown as {needs(params: unknown): {gamma: number | null, allRows: boolean}};
    const needs = policy.needs(compression.params[compression.policy]);
    return {rows: needs.allRows ? (compression.flashAttention ? allRowsFlash : allRows) : 1, gamma: needs.gamma ?? 1};
}
