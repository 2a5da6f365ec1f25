import type http from "node:http";
import type {HttpRefusal} from "./types.js";

/**
 * Reads a JSON request body of at most `limit` bytes: its value, or why it is refused (not JSON, too large, not valid
 * JSON). The rest of a body too large is read and dropped, so the client gets the answer; then the connection closes.
 */
export async function readJsonBody(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    limit: number
): Promise<{json: unknown} | HttpRefusal> {
    if (!/^application\/json\b/i.test(req.headers["content-type"] ?? ""))
        return {status: 415, message: "The body must be JSON, sent with Content-Type: application/json", code: "unsupported_media_type"};
    const tooLarge = (): HttpRefusal => {
        res.shouldKeepAlive = false;
        req.resume();
        return {status: 413, message: `The body is larger than the limit of ${limit} bytes`, code: "body_too_large"};
    };
    if (Number(req.headers["content-length"] ?? 0) > limit) return tooLarge();
    const text = await new Promise<string | null>((resolve, reject) => {
        const chunks: Buffer[] = [];
        let size = 0;
        const onData = (chunk: Buffer) => {
            size += chunk.length;
            if (size > limit) {
                req.off("data", onData);
                resolve(null);
            } else chunks.push(chunk);
        };
        req.on("data", onData);
        req.once("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
        req.once("error", reject);
    });
    if (text == null) return tooLarge();
    try {
        return {json: JSON.parse(text)};
    } catch (err) {
        return {status: 400, message: `The body is not valid JSON: ${(err as Error).message}`, code: "invalid_json"};
    }
}
