// The end-to-end tests run the built app (out/). When a source the build reads is newer than the build, build it
// again first, so `vitest run --project e2e` never tests yesterday's renderer. `npm test` builds before the tests,
// so there this finds the build current and does nothing.
import {execFileSync} from "node:child_process";
import fs from "node:fs";
import path from "node:path";

const root = path.resolve(import.meta.dirname, "../..");
const sources = ["main", "preload", "renderer", "electron.vite.config.ts", "package.json"];
const outputs = ["out/main/headless.js", "out/main/engineProcess.js", "out/renderer/index.html"];

/** The newest modification time under `file` (a file or a folder), in ms; 0 when it does not exist. */
function newest(file: string): number {
    let stat: fs.Stats;
    try {
        stat = fs.statSync(file);
    } catch {
        return 0;
    }
    if (!stat.isDirectory()) return stat.mtimeMs;
    let latest = 0;
    for (const entry of fs.readdirSync(file)) latest = Math.max(latest, newest(path.join(file, entry)));
    return latest;
}

export default function setup(): void {
    const built = Math.min(...outputs.map((file) => newest(path.join(root, file)) || -Infinity));
    const changed = Math.max(...sources.map((file) => newest(path.join(root, file))));
    if (built !== -Infinity && built >= changed) return;
    console.log(
        built === -Infinity
            ? "No app build in out/: building it (electron-vite build)"
            : "Sources newer than out/: building the app again (electron-vite build)"
    );
    execFileSync(path.join(root, "node_modules/.bin/electron-vite"), ["build"], {cwd: root, stdio: "inherit"});
}
