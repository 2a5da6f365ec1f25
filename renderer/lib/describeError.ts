import type {ErrorCode, ErrorInfo} from "../../preload/contract.js";

const fallbacks: Record<ErrorCode, string> = {
    BAD_REQUEST: "The request was not valid",
    NOT_FOUND: "It no longer exists",
    FORBIDDEN: "That is not allowed",
    MODEL_NOT_LOADED: "No model is loaded: load one from the model panel",
    MODEL_INVALID: "The file is not a usable GGUF model",
    ENGINE_UNPATCHED: "The inference engine is not Ponder's patched build",
    BUSY: "The engine is busy with another request",
    CANNOT_CALIBRATE: "This model cannot be calibrated",
    STORAGE: "The database could not be read or written",
    ENGINE_STOPPED: "The engine stopped unexpectedly and is restarting",
    BUDGET_ABOVE_CONTEXT: "The KV budget is more than the model's context",
    BUDGET_DOES_NOT_FIT: "The KV budget does not fit in free memory",
    KV_BUDGET_EXCEEDED: "The conversation is longer than the KV budget holds with Full KV",
    POLICY_UNAVAILABLE: "The loaded model cannot run this policy",
    INTERNAL: "Something went wrong in Ponder's backend"
};

/** A sentence a person can read: what failed, then why (`"Could not rename the conversation: Title is empty"`). */
export function describeError(action: string, error: ErrorInfo): string {
    const reason = error.message.trim() || fallbacks[error.code] || error.code;
    return `${action}: ${reason}`;
}
