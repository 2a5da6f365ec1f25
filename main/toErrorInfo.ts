import {z} from "zod";
import type {ErrorInfo} from "../preload/contract.js";
import {AppError} from "./AppError.js";

/**
 * A thrown error as data that crosses a process boundary (IPC, the engine process's messages): an `AppError` keeps its
 * code and message; a failed schema is `BAD_REQUEST`, a full disk or a storage failure `STORAGE`; anything else is
 * `INTERNAL` with its message, and `onUnexpected` hears it (to log it).
 */
export function toErrorInfo(err: unknown, onUnexpected: (err: unknown) => void = () => {}): ErrorInfo {
    if (err instanceof AppError) return {code: err.code, message: err.message};
    if (err instanceof z.ZodError) return {code: "BAD_REQUEST", message: z.prettifyError(err)};
    if (err instanceof Error && err.name === "StorageError") return {code: "STORAGE", message: err.message};
    if (err instanceof Error && /SQLITE_FULL|ENOSPC/.test(String((err as {code?: string}).code ?? err.message)))
        return {code: "STORAGE", message: "The disk is full: nothing new could be saved. Free some space and try again."};

    onUnexpected(err);
    return {code: "INTERNAL", message: err instanceof Error ? err.message : String(err)};
}
