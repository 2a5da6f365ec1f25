/** Error codes of a connection that may work a moment later: tried again, with a pause that doubles. */
const transientCodes = new Set([
    "ECONNRESET",
    "ETIMEDOUT",
    "EAI_AGAIN",
    "EPIPE",
    "UND_ERR_SOCKET",
    "UND_ERR_CONNECT_TIMEOUT",
    "UND_ERR_HEADERS_TIMEOUT"
]);

const reasons: Record<string, string> = {
    ECONNREFUSED: "the connection was refused (nothing listens at that address)",
    ENOTFOUND: "the host name is not known",
    EAI_AGAIN: "the host name could not be looked up",
    ECONNRESET: "the connection was reset",
    ETIMEDOUT: "the connection timed out",
    EHOSTUNREACH: "the host cannot be reached",
    ENETUNREACH: "the network cannot be reached",
    CERT_HAS_EXPIRED: "the server's certificate has expired",
    DEPTH_ZERO_SELF_SIGNED_CERT: "the server's certificate is self-signed",
    UNABLE_TO_VERIFY_LEAF_SIGNATURE: "the server's certificate cannot be verified"
};

export type ProbeOptions = {
    /** Tries in all, for transient failures (resets, timeouts, 5xx, 429). Defaults to `3`. */
    attempts?: number;
    /** Time one try may take to get the response's headers, in milliseconds. Defaults to `10000`. */
    timeoutMs?: number;
    /** Pause before the second try, doubled before each later one, in milliseconds. Defaults to `500`. */
    backoffMs?: number;
};

/** Why a download cannot start, in words, and whether trying again later may help. */
export class DownloadProbeError extends Error {
    constructor(
        message: string,
        readonly transient: boolean
    ) {
        super(message);
    }
}

/**
 * Asks an http(s) server for a download before the downloader does: resolves with the size it announces (`null` when
 * it announces none), or rejects within seconds with the reason (refused, unknown host, 404, ...) where the
 * downloader would keep retrying. Transient failures are tried again a few times. The body is not fetched.
 */
export async function probeDownload(uri: string, options: ProbeOptions = {}): Promise<number | null> {
    const attempts = options.attempts ?? 3;
    let pause = options.backoffMs ?? 500;
    for (let attempt = 1; ; attempt++) {
        try {
            return await probeOnce(uri, options.timeoutMs ?? 10_000);
        } catch (err) {
            if (!(err instanceof DownloadProbeError) || !err.transient || attempt >= attempts)
                throw err instanceof DownloadProbeError && err.transient && attempts > 1
                    ? new DownloadProbeError(`${err.message} (tried ${attempts} times)`, true)
                    : err;
        }
        await new Promise((resolve) => setTimeout(resolve, pause));
        pause *= 2;
    }
}

async function probeOnce(uri: string, timeoutMs: number): Promise<number | null> {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), timeoutMs);
    try {
        let response: Response;
        try {
            response = await fetch(uri, {signal: abort.signal, redirect: "follow"});
        } catch (err) {
            if (abort.signal.aborted)
                throw new DownloadProbeError(`the server did not answer within ${Math.round(timeoutMs / 1000)} s`, true);
            const code = causeCode(err);
            const cause = innermost(err);
            const reason =
                code != null
                    ? (reasons[code] ?? code)
                    : cause === "bad port"
                      ? `port ${new URL(uri).port} is one that web requests may not use (a blocked port)`
                      : cause;
            throw new DownloadProbeError(reason, code != null && transientCodes.has(code));
        }
        if (!response.ok) {
            const transient = response.status >= 500 || response.status === 429 || response.status === 408;
            throw new DownloadProbeError(
                `the server answered ${response.status}${response.statusText !== "" ? ` ${response.statusText}` : ""}`,
                transient
            );
        }
        const length = Number(response.headers.get("content-length"));
        return Number.isFinite(length) && length > 0 ? length : null;
    } finally {
        clearTimeout(timer);
        abort.abort();
    }
}

/** The message of the deepest cause (fetch's own is only "fetch failed"). */
function innermost(err: unknown): string {
    let error = err as {message?: unknown; cause?: unknown};
    for (let depth = 0; error.cause != null && typeof error.cause === "object" && depth < 4; depth++) error = error.cause as typeof error;
    return typeof error.message === "string" && error.message !== "" ? error.message : String(err);
}

function causeCode(err: unknown): string | null {
    for (
        let cause = err as {code?: unknown; cause?: unknown} | undefined, depth = 0;
        cause != null && depth < 4;
        cause = cause.cause as typeof cause, depth++
    )
        if (typeof cause.code === "string") return cause.code;
    return null;
}
