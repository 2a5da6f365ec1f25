import {execFileSync, spawn, type ChildProcess} from "node:child_process";
import path from "node:path";
import readline from "node:readline";

const repoRoot = path.resolve(import.meta.dirname, "../..");

export type HeadlessOptions = {
    dataDir: string;
    model?: string;
    seed?: number;
    port?: number;
    token?: string;
    /** Starts the OpenAI-compatible API server on this port (`--serve`). */
    servePort?: number;
    /** Settings of retention calibrations (`--calibration`). */
    calibration?: Record<string, number>;
};

/** Ponder's built main process in headless mode, as a child process the test can kill. */
export class HeadlessPonder {
    private constructor(
        readonly process: ChildProcess,
        readonly url: string,
        readonly port: number,
        readonly token: string,
        /** The API server's base URL when it was started with `--serve`. */
        readonly api: string | null
    ) {}

    static async start(options: HeadlessOptions): Promise<HeadlessPonder> {
        const args = [path.join(repoRoot, "out/main/headless.js"), "--data-dir", options.dataDir];
        if (options.model != null) args.push("--model", options.model);
        if (options.seed != null) args.push("--seed", String(options.seed));
        if (options.port != null) args.push("--port", String(options.port));
        if (options.token != null) args.push("--token", options.token);
        if (options.servePort != null) args.push("--serve", "--serve-port", String(options.servePort));
        if (options.calibration != null) args.push("--calibration", JSON.stringify(options.calibration));

        const child = spawn(process.execPath, args, {cwd: repoRoot, stdio: ["ignore", "pipe", "pipe"]});
        let stderr = "";
        child.stderr!.on("data", (chunk: Buffer) => {
            stderr += chunk.toString();
        });
        const lines = readline.createInterface({input: child.stdout!});
        return await new Promise<HeadlessPonder>((resolve, reject) => {
            const timer = setTimeout(() => reject(new Error(`Headless Ponder did not start in time:\n${stderr}`)), 120_000);
            child.once("exit", (code) => {
                clearTimeout(timer);
                reject(new Error(`Headless Ponder exited with ${code}:\n${stderr}`));
            });
            lines.on("line", (line) => {
                try {
                    const info = (JSON.parse(line) as {ponderHeadless?: {url: string; port: number; api: string | null}}).ponderHeadless;
                    if (info == null) return;
                    clearTimeout(timer);
                    child.removeAllListeners("exit");
                    const token = new URL(info.url).searchParams.get("token")!;
                    resolve(new HeadlessPonder(child, info.url, info.port, token, info.api ?? null));
                } catch {
                    // Not our line.
                }
            });
        });
    }

    /** The engine process's id: the headless process's one child. */
    enginePid(): number {
        const children = execFileSync("ps", ["-o", "pid=", "--ppid", String(this.process.pid)], {encoding: "utf8"})
            .trim()
            .split(/\s+/)
            .filter(Boolean);
        if (children.length !== 1) throw new Error(`Expected one engine process under ${this.process.pid}, found ${children.length}`);
        return Number(children[0]);
    }

    /** Kills the process the hard way, as a crash or a power cut of the backend would. */
    async kill(): Promise<void> {
        if (this.process.exitCode != null || this.process.signalCode != null) return;
        const exited = new Promise((resolve) => this.process.once("exit", resolve));
        this.process.kill("SIGKILL");
        await exited;
    }

    async stop(): Promise<void> {
        if (this.process.exitCode != null || this.process.signalCode != null) return;
        const exited = new Promise((resolve) => this.process.once("exit", resolve));
        this.process.kill("SIGTERM");
        await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 10_000))]);
        await this.kill();
    }
}
