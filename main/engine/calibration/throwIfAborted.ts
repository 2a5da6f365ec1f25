/** Throws the signal's reason once it is aborted (a calibration cancelled). */
export function throwIfAborted(signal: AbortSignal | undefined): void {
    if (signal?.aborted) throw signal.reason ?? new Error("calibration cancelled");
}
