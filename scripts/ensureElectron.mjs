#!/usr/bin/env node
// Runs before `npm start` and `npm run dev`: makes sure Electron's binary is present, since electron-vite reads
// node_modules/electron/path.txt itself and fails with "Electron uninstall" when Electron 45 has not downloaded it yet
// (Electron 45 has no postinstall download; it fetches the binary on the first `require("electron")`).
//
//   node scripts/ensureElectron.mjs [--electron-dir <dir>]
//
// Binary present: exits 0 at once. Missing: runs Electron's own installer (node_modules/electron/install.js, which
// honours ELECTRON_MIRROR, electron_config_cache and the other @electron/get settings) with a progress line, exits 0
// once path.txt points at an executable. Download impossible: one sentence on stderr that says how to run the same
// app headless in a browser, exit 1.
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import {createRequire} from "node:module";
import {fileURLToPath} from "node:url";

const log = (message) => console.log(`[ponder] ${message}`);

/** The executable's path inside Electron's `dist/` on `platform`, as Electron's install.js names it; null where Electron has no build. */
export function electronPlatformPath(platform = process.platform) {
    switch (platform) {
        case "darwin":
        case "mas":
            return "Electron.app/Contents/MacOS/Electron";
        case "linux":
        case "freebsd":
        case "openbsd":
            return "electron";
        case "win32":
            return "electron.exe";
        default:
            return null;
    }
}

/**
 * Whether the Electron package in `electronDir` has its binary, by the checks its own install.js makes: `dist/version`
 * is the package's version, `path.txt` names this platform's executable, and that file exists.
 */
export function isElectronInstalled(electronDir, platform = process.platform) {
    const version = JSON.parse(fs.readFileSync(path.join(electronDir, "package.json"), "utf8")).version;
    const platformPath = electronPlatformPath(platform);
    try {
        if (
            fs
                .readFileSync(path.join(electronDir, "dist", "version"), "utf8")
                .replace(/^v/, "")
                .trim() !== version
        )
            return false;
        if (fs.readFileSync(path.join(electronDir, "path.txt"), "utf8") !== platformPath) return false;
    } catch {
        return false;
    }
    return platformPath != null && fs.existsSync(path.join(electronDir, "dist", platformPath));
}

/** The sentence printed when the binary cannot be had: the reason, and the way to the same app without Electron. */
export function headlessHint(reason) {
    return (
        `Ponder cannot open its window: Electron's binary is missing and could not be downloaded (${reason}); ` +
        "run the same app in a browser instead with `npm run headless` (it prints the address to open, with its access token)."
    );
}

/** The installer's own error, reduced to one line: the first line of the stack it prints, or its exit status. */
function installerReason(stderr, status) {
    const line = stderr
        .split("\n")
        .map((text) => text.trim())
        .find((text) => text !== "" && !text.startsWith("at "));
    return line ?? `Electron's installer exited with code ${status}`;
}

/**
 * Makes sure the binary of the Electron package in `electronDir` is present, downloading it with that package's own
 * install.js when it is not. Returns `{ok: true, fetched}` or `{ok: false, message}` (one sentence).
 */
export function ensureElectron(electronDir, {env = process.env, platform = process.platform} = {}) {
    const packageJson = JSON.parse(fs.readFileSync(path.join(electronDir, "package.json"), "utf8"));
    if (isElectronInstalled(electronDir, platform)) return {ok: true, fetched: false};
    if (electronPlatformPath(platform) == null) return {ok: false, message: headlessHint(`Electron has no build for ${platform}`)};

    const mirror = env.ELECTRON_MIRROR ?? env.npm_config_electron_mirror ?? "https://github.com/electron/electron/releases/download/";
    log(
        `Electron ${packageJson.version} has no binary here yet: downloading it for ${platform}-${process.arch} from ${mirror} ` +
            "with Electron's installer (about 100 MB, once)..."
    );
    const result = spawnSync(process.execPath, [path.join(electronDir, "install.js")], {
        cwd: electronDir,
        env,
        stdio: ["ignore", "inherit", "pipe"],
        encoding: "utf8"
    });
    if (result.error != null) return {ok: false, message: headlessHint(result.error.message)};
    if (result.status !== 0) return {ok: false, message: headlessHint(installerReason(result.stderr ?? "", result.status))};
    if (!isElectronInstalled(electronDir, platform))
        return {ok: false, message: headlessHint("the installer finished but left no executable in node_modules/electron/dist")};
    log(`Electron ${packageJson.version} is installed in ${path.join(electronDir, "dist")}.`);
    return {ok: true, fetched: true};
}

function electronDirFromArgs(argv) {
    const index = argv.indexOf("--electron-dir");
    if (index >= 0 && argv[index + 1] != null) return path.resolve(argv[index + 1]);
    const require = createRequire(import.meta.url);
    return path.dirname(require.resolve("electron/package.json"));
}

if (process.argv[1] != null && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
    const result = ensureElectron(electronDirFromArgs(process.argv.slice(2)));
    if (!result.ok) {
        console.error(result.message);
        process.exit(1);
    }
}
