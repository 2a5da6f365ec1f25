#!/usr/bin/env node
// Starts llama.cpp's rpc-server from Ponder's engine build (native/patches/0009 builds it beside the addon from the same
// source, so it speaks the engine's RPC protocol version), bound to this machine only unless told otherwise.
//
//   npm run rpc-server -- [--host 127.0.0.1] [--port 50052] [--threads N] [--device DEV[,DEV...]] [--cache]
//                         [--gpu auto|false|cuda|metal|vulkan]
//
// --host     the address to listen on; default 127.0.0.1 (this machine only). Any other address lets every client that
//            can reach it run graphs on this machine and read its memory there: rpc-server has no authentication.
// --gpu      which engine build's server to run; default: the best build present (CUDA, Vulkan, Metal, then CPU), so a
//            server on a GPU machine offers its GPU.
// The rest go to rpc-server as they are (its --help lists them).
import {spawn} from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import process from "node:process";
import {createRequire} from "node:module";
import {fileURLToPath} from "node:url";
import {rpcServerFileName} from "./buildConfig.mjs";
import {computeSeriesHash} from "./seriesHash.mjs";

const gpuOrder = ["cuda", "vulkan", "metal", false];

function fail(message) {
    console.error(`[ponder rpc-server] ${message}`);
    process.exit(2);
}

function parseArgs(argv) {
    const args = {host: "127.0.0.1", port: "50052", gpu: "auto", rest: []};
    for (let i = 0; i < argv.length; i++) {
        const arg = argv[i];
        const [name, inline] =
            arg.startsWith("--") && arg.includes("=") ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)] : [arg, null];
        const value = () => inline ?? argv[++i] ?? fail(`${name} needs a value`);
        if (name === "--host" || name === "-H") args.host = value();
        else if (name === "--port" || name === "-p") args.port = value();
        else if (name === "--gpu") args.gpu = value();
        else if (name === "--help" || name === "-h") {
            console.log(
                fs
                    .readFileSync(fileURLToPath(import.meta.url), "utf8")
                    .split("\n")
                    .filter((line) => line.startsWith("//"))
                    .map((line) => line.slice(3))
                    .join("\n")
            );
            process.exit(0);
        } else if (name === "--threads" || name === "-t" || name === "--device" || name === "-d") args.rest.push(name, value());
        else if (name === "--cache" || name === "-c") args.rest.push(name);
        else fail(`unknown argument ${arg} (see --help)`);
    }
    if (!/^\d{1,5}$/.test(args.port) || Number(args.port) < 1 || Number(args.port) > 65535)
        fail(`--port must be 1 to 65535, got ${args.port}`);
    if (net.isIPv6(args.host)) fail("--host must be a host name or an IPv4 address (llama.cpp's RPC does not take IPv6)");
    if (!["auto", "false", "cuda", "metal", "vulkan"].includes(args.gpu))
        fail(`--gpu must be auto, false, cuda, metal or vulkan, got ${args.gpu}`);
    return args;
}

/** The engine builds of the current patch series that have an rpc-server, best GPU first. */
function findServer(gpu) {
    const require = createRequire(import.meta.url);
    let packageDir = path.dirname(require.resolve("node-llama-cpp"));
    while (
        !fs.existsSync(path.join(packageDir, "package.json")) ||
        JSON.parse(fs.readFileSync(path.join(packageDir, "package.json"), "utf8")).name !== "node-llama-cpp"
    )
        packageDir = path.dirname(packageDir);
    const version = JSON.parse(fs.readFileSync(path.join(packageDir, "package.json"), "utf8")).version;
    const seriesHash = computeSeriesHash(version);
    const root = path.join(packageDir, "llama", "localBuilds");
    const found = [];
    for (const folder of fs.existsSync(root) ? fs.readdirSync(root) : []) {
        try {
            const stamp = JSON.parse(fs.readFileSync(path.join(root, folder, "ponder-native.json"), "utf8"));
            const binary = path.join(root, folder, "Release", rpcServerFileName());
            if (stamp.seriesHash === seriesHash && fs.existsSync(binary)) found.push({folder, gpu: stamp.gpu, binary});
        } catch {
            // no stamp: not a build of Ponder's
        }
    }
    const wanted = gpu === "auto" ? found : found.filter((build) => String(build.gpu) === gpu);
    wanted.sort((a, b) => gpuOrder.indexOf(a.gpu) - gpuOrder.indexOf(b.gpu));
    if (wanted.length === 0)
        fail(
            `no engine build of the current patch series ${seriesHash}${gpu === "auto" ? "" : ` for --gpu ${gpu}`} has an rpc-server: run npm run build:native`
        );
    return wanted[0];
}

const args = parseArgs(process.argv.slice(2));
const server = findServer(args.gpu);
const loopback = args.host === "localhost" || (net.isIPv4(args.host) && args.host.startsWith("127."));
console.log(
    `[ponder rpc-server] ${path.relative(process.cwd(), server.binary)} (${server.gpu === false ? "CPU" : server.gpu} build) on ${args.host}:${args.port}`
);
if (loopback)
    console.log(
        "[ponder rpc-server] listening on this machine only: Ponder on this machine can use it; start it with --host <address> for another machine"
    );
else
    console.warn(
        `[ponder rpc-server] WARNING: listening on ${args.host}: any client that can reach it can run graphs here and read ` +
            "what it holds (rpc-server has no authentication). Use it only on a network you trust, never an open one."
    );

const child = spawn(server.binary, ["--host", args.host, "--port", args.port, ...args.rest], {stdio: "inherit"});
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => child.kill(signal));
child.on("exit", (code, signal) => process.exit(code ?? (signal != null ? 1 : 0)));
