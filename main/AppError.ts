import type {ErrorCode} from "../preload/contract.js";

/** A failure with a stable code that crosses IPC as data; its message is written for a person. */
export class AppError extends Error {
    override name = "AppError";

    constructor(
        readonly code: ErrorCode,
        message: string,
        options?: {cause?: unknown}
    ) {
        super(message, options);
    }
}
