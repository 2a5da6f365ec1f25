import {createHash, timingSafeEqual} from "node:crypto";
import type http from "node:http";
import type {HttpRefusal} from "./types.js";

/** Who may call a server: the address it listens on, the hash of the key clients must send, the browser origins allowed. */
export type Access = {
    host: string;
    /** SHA-256 of the API key clients must send as a bearer token; `null` for none (loopback only). */
    keyHash: Buffer | null;
    /** Browser origins allowed by CORS. Defaults to none. */
    corsOrigins?: string[];
};

const loopbackHosts = new Set(["127.0.0.1", "::1", "localhost"]);

export function isLoopback(host: string): boolean {
    return loopbackHosts.has(host) || /^127\.\d+\.\d+\.\d+$/.test(host);
}

export function hashKey(key: string): Buffer {
    return createHash("sha256").update(key).digest();
}

/**
 * Host (DNS rebinding), origin (CORS) and key checks: why `req` is refused, or `null` to serve it. Sets the CORS headers
 * of an allowed origin on `res`; a preflight (`OPTIONS`) from one needs no key.
 */
export function checkAccess(req: http.IncomingMessage, res: http.ServerResponse, access: Access): HttpRefusal | null {
    if (isLoopback(access.host)) {
        if (req.headers.host == null || req.headers.host === "")
            return {
                status: 400,
                message: "The request has no Host header: HTTP/1.1 requires one (this server answers on loopback addresses only)",
                code: "missing_host"
            };
        const hostname = req.headers.host.replace(/:\d+$/, "").replace(/^\[(.*)\]$/, "$1");
        if (!isLoopback(hostname))
            return {
                status: 403,
                message: `Host ${JSON.stringify(req.headers.host)} refused: this server answers on loopback addresses only`,
                code: "forbidden_host"
            };
    }
    const origin = req.headers.origin;
    if (origin != null) {
        if (!(access.corsOrigins ?? []).includes(origin))
            return {
                status: 403,
                message: `Origin ${origin} is not allowed: add it to the server's allowed origins`,
                code: "forbidden_origin"
            };
        res.setHeader("access-control-allow-origin", origin);
        res.setHeader("vary", "Origin");
        res.setHeader("access-control-allow-headers", "authorization, content-type");
        res.setHeader("access-control-allow-methods", "GET, POST, OPTIONS");
        res.setHeader("access-control-max-age", "600");
        if (req.method === "OPTIONS") return null; // a preflight carries no credentials
    }
    const expected = access.keyHash;
    if (expected != null) {
        const match = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? "");
        if (match == null)
            return {status: 401, message: "An API key is required: send it as Authorization: Bearer <key>", code: "invalid_api_key"};
        if (!timingSafeEqual(hashKey(match[1]!), expected)) return {status: 401, message: "The API key is wrong", code: "invalid_api_key"};
    }
    return null;
}
