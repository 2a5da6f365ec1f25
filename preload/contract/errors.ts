// The error envelope every request's result carries: a stable code and words a person reads.

export type ErrorCode =
    | "BAD_REQUEST"
    | "NOT_FOUND"
    | "FORBIDDEN"
    | "MODEL_NOT_LOADED"
    | "MODEL_INVALID"
    | "ENGINE_UNPATCHED"
    | "BUSY"
    /** The model cannot be calibrated (an architecture whose gates Ponder cannot read or train). */
    | "CANNOT_CALIBRATE"
    | "STORAGE"
    /** The engine process stopped (a crash, a native abort, out of memory); it restarts. */
    | "ENGINE_STOPPED"
    /** A KV budget above what the model can use (its trained context): refused with the cap in words. */
    | "BUDGET_ABOVE_CONTEXT"
    /** A KV allocation the fit estimate says does not fit in free memory: refused before llama.cpp is asked. */
    | "BUDGET_DOES_NOT_FIT"
    /** With Full KV, a conversation longer than its KV budget holds (with room for the answer's first tokens). */
    | "KV_BUDGET_EXCEEDED"
    /** A policy the loaded model cannot run (TRIM-KV without retention gates trained for it): refused with the reason. */
    | "POLICY_UNAVAILABLE"
    | "INTERNAL";

export type ErrorInfo = {code: ErrorCode; message: string};
export type Result<T> = {ok: true; value: T} | {ok: false; error: ErrorInfo};
