// `npm start`'s first step (scripts/ensureElectron.mjs) in its three cases: Electron's binary present, fetched through
// Electron's own installer (from a local mirror serving a small stand-in archive), and impossible to download.
import {spawn} from "node:child_process";
import {createHash} from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import type {AddressInfo} from "node:net";
import os from "node:os";
import path from "node:path";
import zlib from "node:zlib";
import {createRequire} from "node:module";
import {afterEach, beforeEach, expect, test} from "vitest";

const repoRoot = path.resolve(import.meta.dirname, "../../..");
const script = path.join(repoRoot, "scripts/ensureElectron.mjs");
const require = createRequire(import.meta.url);
const realElectronDir = path.dirname(require.resolve("electron/package.json"));
const electronVersion = (JSON.parse(fs.readFileSync(path.join(realElectronDir, "package.json"), "utf8")) as {version: string}).version;
const platformPath =
    process.platform === "win32" ? "electron.exe" : process.platform === "darwin" ? "Electron.app/Contents/MacOS/Electron" : "electron";
const archiveName = `electron-v${electronVersion}-${process.platform}-${process.arch}.zip`;

let tmp: string;
let electronDir: string;
let cacheDir: string;

beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-electron-"));
    // a copy of the electron package as npm leaves it: no dist/, no path.txt
    electronDir = path.join(tmp, "electron");
    fs.mkdirSync(electronDir);
    for (const file of ["package.json", "install.js", "checksums.json"])
        fs.copyFileSync(path.join(realElectronDir, file), path.join(electronDir, file));
    cacheDir = path.join(tmp, "cache");
});

afterEach(() => {
    fs.rmSync(tmp, {recursive: true, force: true});
});

/** A stored (uncompressed) zip archive of `files`, each with Unix mode `mode`. */
function zipArchive(files: {name: string; data: Buffer; mode: number}[]): Buffer {
    const locals: Buffer[] = [];
    const centrals: Buffer[] = [];
    let offset = 0;
    for (const file of files) {
        const name = Buffer.from(file.name);
        const crc = zlib.crc32(file.data);
        const local = Buffer.alloc(30);
        local.writeUInt32LE(0x04034b50, 0);
        local.writeUInt16LE(20, 4);
        local.writeUInt32LE(crc, 14);
        local.writeUInt32LE(file.data.length, 18);
        local.writeUInt32LE(file.data.length, 22);
        local.writeUInt16LE(name.length, 26);
        const central = Buffer.alloc(46);
        central.writeUInt32LE(0x02014b50, 0);
        central.writeUInt16LE((3 << 8) | 20, 4); // made by Unix, so the external attributes carry the mode
        central.writeUInt16LE(20, 6);
        central.writeUInt32LE(crc, 16);
        central.writeUInt32LE(file.data.length, 20);
        central.writeUInt32LE(file.data.length, 24);
        central.writeUInt16LE(name.length, 28);
        central.writeUInt32LE(((0o100000 | file.mode) << 16) >>> 0, 38);
        central.writeUInt32LE(offset, 42);
        locals.push(local, name, file.data);
        centrals.push(central, name);
        offset += local.length + name.length + file.data.length;
    }
    const centralSize = centrals.reduce((sum, part) => sum + part.length, 0);
    const end = Buffer.alloc(22);
    end.writeUInt32LE(0x06054b50, 0);
    end.writeUInt16LE(files.length, 8);
    end.writeUInt16LE(files.length, 10);
    end.writeUInt32LE(centralSize, 12);
    end.writeUInt32LE(offset, 16);
    return Buffer.concat([...locals, ...centrals, end]);
}

/** Serves `archive` where Electron's installer looks for this version's archive under ELECTRON_MIRROR; counts requests. */
async function startMirror(archive: Buffer): Promise<{url: string; requests: string[]; close(): Promise<void>}> {
    const requests: string[] = [];
    const server = http.createServer((request, response) => {
        requests.push(request.url ?? "");
        if (request.url === `/v${electronVersion}/${archiveName}`) {
            response.writeHead(200, {"content-type": "application/zip", "content-length": archive.length});
            response.end(archive);
        } else {
            response.writeHead(404);
            response.end();
        }
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return {
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
        requests,
        close: () => new Promise<void>((resolve) => server.close(() => resolve()))
    };
}

function runScript(env: Record<string, string>): Promise<{code: number | null; stdout: string; stderr: string}> {
    return new Promise((resolve) => {
        const child = spawn(process.execPath, [script, "--electron-dir", electronDir], {
            // the copied install.js finds @electron/get and the zip extractor in the repository's node_modules
            env: {
                ...process.env,
                NODE_PATH: path.join(repoRoot, "node_modules"),
                electron_config_cache: cacheDir,
                ELECTRON_GET_NO_PROGRESS: "1",
                ...env
            },
            stdio: ["ignore", "pipe", "pipe"]
        });
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
        child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
        child.on("close", (code) => resolve({code, stdout, stderr}));
    });
}

test("a missing binary is fetched through Electron's own installer, with a progress line, and path.txt then names it", async () => {
    const executable = Buffer.from("#!/bin/sh\necho stand-in electron\n");
    const archive = zipArchive([
        {name: platformPath, data: executable, mode: 0o755},
        {name: "version", data: Buffer.from(`v${electronVersion}`), mode: 0o644}
    ]);
    // the installer verifies the archive against the package's checksums.json
    fs.writeFileSync(
        path.join(electronDir, "checksums.json"),
        JSON.stringify({[archiveName]: createHash("sha256").update(archive).digest("hex")})
    );
    const mirror = await startMirror(archive);
    try {
        const result = await runScript({ELECTRON_MIRROR: mirror.url});
        expect(result.stderr).toBe("");
        expect(result.code).toBe(0);
        expect(result.stdout).toMatch(
            new RegExp(`Electron ${electronVersion.replaceAll(".", "\\.")} has no binary here yet: downloading it`)
        );
        expect(mirror.requests).toContain(`/v${electronVersion}/${archiveName}`);
        expect(fs.readFileSync(path.join(electronDir, "path.txt"), "utf8")).toBe(platformPath);
        expect(fs.readFileSync(path.join(electronDir, "dist", platformPath))).toEqual(executable);
        if (process.platform !== "win32") expect(fs.statSync(path.join(electronDir, "dist", platformPath)).mode & 0o111).not.toBe(0);

        // present now: the next start neither downloads nor prints anything
        const again = await runScript({ELECTRON_MIRROR: mirror.url});
        expect(again).toEqual({code: 0, stdout: "", stderr: ""});
        expect(mirror.requests.filter((url) => url.endsWith(".zip"))).toHaveLength(1);
    } finally {
        await mirror.close();
    }
});

test("a present binary is used as it is, with no download attempted", async () => {
    fs.mkdirSync(path.dirname(path.join(electronDir, "dist", platformPath)), {recursive: true});
    fs.writeFileSync(path.join(electronDir, "dist", platformPath), "binary", {mode: 0o755});
    fs.writeFileSync(path.join(electronDir, "dist", "version"), `v${electronVersion}`);
    fs.writeFileSync(path.join(electronDir, "path.txt"), platformPath);
    const mirror = await startMirror(Buffer.alloc(0));
    try {
        expect(await runScript({ELECTRON_MIRROR: mirror.url})).toEqual({code: 0, stdout: "", stderr: ""});
        expect(mirror.requests).toEqual([]);
    } finally {
        await mirror.close();
    }
});

test("a binary of another Electron version counts as missing", async () => {
    fs.mkdirSync(path.dirname(path.join(electronDir, "dist", platformPath)), {recursive: true});
    fs.writeFileSync(path.join(electronDir, "dist", platformPath), "binary", {mode: 0o755});
    fs.writeFileSync(path.join(electronDir, "dist", "version"), "v1.0.0");
    fs.writeFileSync(path.join(electronDir, "path.txt"), platformPath);
    const mirror = await startMirror(Buffer.alloc(0));
    try {
        const result = await runScript({ELECTRON_MIRROR: mirror.url});
        expect(result.code).toBe(1);
        expect(mirror.requests).toContain(`/v${electronVersion}/${archiveName}`);
    } finally {
        await mirror.close();
    }
});

test("an impossible download stops with one sentence that says how to run the app headless in a browser", async () => {
    // a port nothing listens on: connection refused
    const closed = await startMirror(Buffer.alloc(0));
    await closed.close();
    const result = await runScript({ELECTRON_MIRROR: closed.url});
    expect(result.code).toBe(1);
    const lines = result.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
        /^Ponder cannot open its window: Electron's binary is missing and could not be downloaded \(.+\); run the same app in a browser instead with `npm run headless`/
    );
    expect(fs.existsSync(path.join(electronDir, "path.txt"))).toBe(false);
});

test("a mirror without the archive is an impossible download too", async () => {
    const mirror = await startMirror(Buffer.alloc(0));
    try {
        const result = await runScript({ELECTRON_MIRROR: `${mirror.url}missing/`});
        expect(result.code).toBe(1);
        expect(result.stderr.trim().split("\n")).toHaveLength(1);
        expect(result.stderr).toMatch(/\(HTTPError: .*404.*\).*npm run headless/);
    } finally {
        await mirror.close();
    }
});
