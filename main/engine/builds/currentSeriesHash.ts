import fs from "node:fs";
import {createRequire} from "node:module";
import path from "node:path";
import {pathToFileURL} from "node:url";

/** Set by electron.vite.config.ts when the app is built: native/seriesHash.mjs's hash of the patch series. */
declare const __PONDER_SERIES_HASH__: string | undefined;

type SeriesHashModule = {computeSeriesHash(nodeLlamaCppVersion: string): string};

let cached: Promise<string | null> | null = null;

/**
 * The patch series this code needs, as native/build.mjs stamps it into a build: fixed when electron-vite builds the app,
 * computed from native/ when run from the sources (tests, tsx); `null` when neither is there.
 */
export function currentSeriesHash(): Promise<string | null> {
    cached ??= computeCurrent();
    return cached;
}

async function computeCurrent(): Promise<string | null> {
    if (typeof __PONDER_SERIES_HASH__ === "string") return __PONDER_SERIES_HASH__;
    const script = path.resolve(import.meta.dirname, "../../../native/seriesHash.mjs");
    if (!fs.existsSync(script)) return null;
    // A path made at run time: the bundler leaves it alone (a built app has the hash above).
    const {computeSeriesHash} = (await import(/* @vite-ignore */ pathToFileURL(script).href)) as SeriesHashModule;
    const packageJson = path.join(path.dirname(createRequire(import.meta.url).resolve("node-llama-cpp")), "..", "package.json");
    return computeSeriesHash((JSON.parse(fs.readFileSync(packageJson, "utf8")) as {version: string}).version);
}
