import type {Result} from "../../preload/contract.js";
import {describeError} from "../lib/describeError.js";

/**
 * Whether a request succeeded, said in a state module's `error`: cleared when it did, else what failed (`failed`),
 * then why. The result is its value from there on.
 */
export function succeeded<T>(result: Result<T>, state: {error: string | null}, failed: string): result is Extract<Result<T>, {ok: true}> {
    state.error = result.ok ? null : describeError(failed, result.error);
    return result.ok;
}
