import {AppError} from "../../AppError.js";
import {findRetentionGates, type RetentionModel} from "./findRetentionGates.js";
import type {RetentionAvailability} from "./types.js";

/** The model's retention gates for TRIM-KV, or a `POLICY_UNAVAILABLE` refusal that says why there are none. */
export async function requireRetentionGates(model: RetentionModel): Promise<Extract<RetentionAvailability, {available: true}>> {
    const found = await findRetentionGates(model);
    if (!found.available) throw new AppError("POLICY_UNAVAILABLE", `TRIM-KV needs retention gates trained for this model: ${found.reason}`);
    return found;
}
