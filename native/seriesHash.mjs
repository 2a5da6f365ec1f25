// The identity of Ponder's native patch series: which patches, in which order, against which node-llama-cpp.
// Shared by native/build.mjs (stamp, and the hash compiled into the addon) and the tests that check a build is current.
import {createHash} from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import {fileURLToPath} from "node:url";

export const nativeDir = path.dirname(fileURLToPath(import.meta.url));
export const patchesDir = path.join(nativeDir, "patches");
export const seriesPath = path.join(patchesDir, "series");

/** The patch targets: directories under `node_modules/node-llama-cpp/llama/`. */
export const patchTargets = ["llama.cpp", "addon"];

/**
 * Reads `native/patches/series`: one patch per line, `<file> <target>`, `#` starts a comment.
 * @returns {{file: string, target: "llama.cpp" | "addon", path: string}[]}
 */
export function readSeries() {
    if (!fs.existsSync(seriesPath)) throw new Error(`Patch series not found: ${seriesPath}`);

    const entries = [];
    const lines = fs.readFileSync(seriesPath, "utf8").split("\n");
    for (let i = 0; i < lines.length; i++) {
        const line = lines[i].replace(/#.*$/, "").trim();
        if (line === "") continue;

        const [file, target, ...rest] = line.split(/\s+/);
        if (target == null || rest.length > 0 || !patchTargets.includes(target))
            throw new Error(`${seriesPath}:${i + 1}: expected "<patch file> <${patchTargets.join("|")}>", got "${line}"`);

        const patchPath = path.join(patchesDir, file);
        if (!fs.existsSync(patchPath)) throw new Error(`${seriesPath}:${i + 1}: patch file not found: ${patchPath}`);

        entries.push({file, target: /** @type {"llama.cpp" | "addon"} */ (target), path: patchPath});
    }

    return entries;
}

/**
 * Hash of the series file, every patch in it (in order) and the node-llama-cpp version the patches are for.
 * @param {string} nodeLlamaCppVersion
 * @returns {string} 16 hex digits
 */
export function computeSeriesHash(nodeLlamaCppVersion) {
    const hash = createHash("sha256");
    hash.update("node-llama-cpp@" + nodeLlamaCppVersion + "\0");
    hash.update(fs.readFileSync(seriesPath));
    for (const entry of readSeries()) {
        hash.update("\0" + entry.file + "\0" + entry.target + "\0");
        hash.update(fs.readFileSync(entry.path));
    }

    return hash.digest("hex").slice(0, 16);
}
