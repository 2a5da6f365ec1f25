import {createHash} from "node:crypto";
import fs from "node:fs";

/** Bytes hashed at each end of the model file. */
export const fingerprintSpan = 8 * 1024 * 1024;

const cache = new Map<string, Promise<string>>();

/**
 * The model identity a retention gate file records (`ponder.retention.model.fingerprint`): lowercase hex SHA-256 over the
 * file's size in decimal ASCII, `"\n"`, its bytes [0, min(size, 8 MiB)), then its bytes [max(0, size - 8 MiB), size).
 * Read streaming (at most 16 MiB, whatever the model's size), and kept per (path, size, mtime).
 */
export async function modelFingerprint(filePath: string): Promise<string> {
    const stat = await fs.promises.stat(filePath);
    const key = `${filePath}\0${stat.size}\0${stat.mtimeMs}`;
    let pending = cache.get(key);
    if (pending == null) {
        pending = hashEnds(filePath, stat.size);
        cache.set(key, pending);
        pending.catch(() => cache.delete(key));
    }
    return pending;
}

async function hashEnds(filePath: string, size: number): Promise<string> {
    const hash = createHash("sha256");
    hash.update(`${size}\n`, "latin1");
    const ranges: [number, number][] = [
        [0, Math.min(size, fingerprintSpan)],
        [Math.max(0, size - fingerprintSpan), size]
    ];
    for (const [start, end] of ranges) {
        if (end <= start) continue;
        // createReadStream's `end` is inclusive.
        for await (const chunk of fs.createReadStream(filePath, {start, end: end - 1, highWaterMark: 1 << 20}))
            hash.update(chunk as Buffer);
    }
    return hash.digest("hex");
}
