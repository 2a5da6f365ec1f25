import type http from "node:http";

/** Answers with `payload` as JSON, its length said. */
export function writeJson(res: http.ServerResponse, status: number, payload: unknown): void {
    const body = JSON.stringify(payload);
    res.writeHead(status, {"content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(body)}).end(body);
}
