import os from "node:os";
import path from "node:path";
import {parseArgs} from "node:util";
import {checkGgufHeader} from "./engine/gguf/checkGgufHeader.js";

/** The headless mode's options, as parsed from its command line. */
export type HeadlessArgs = {
    dataDir: string;
    renderer: string;
    port: number;
    token?: string;
    model?: string;
    seed?: number;
    threads?: number;
    serve: boolean;
    serveHost?: string;
    servePort?: number;
    /** Settings of every retention calibration (`--calibration`). */
    calibration?: CalibrationArgs;
};

/** The retention calibration's settings the command line may set (calibrateRetention's options of the same names). */
export type CalibrationArgs = Partial<Record<(typeof calibrationKeys)[number], number>>;

const calibrationKeys = ["prompts", "validationPrompts", "tokens", "maxTokens", "seed", "hidden", "epochs"] as const;

export const headlessUsage = `Usage: node out/main/headless.js [options]

Runs Ponder without a window: the app's services, with its page served to a browser on 127.0.0.1.

Options:
  --data-dir <dir>     Where conversations, settings and models live. Defaults to ~/.config/Ponder.
  --port <n>           Port of the page and its bridge on 127.0.0.1; 0 picks a free one. Defaults to 0.
  --token <secret>     The secret the page must present. Defaults to a random one, printed in the page's URL.
  --model <file.gguf>  Adds this model and loads it. Defaults to the last model used.
  --seed <n>           Sampling seed for every chat, for repeatable runs.
  --threads <n>        CPU threads of the engine. Defaults to llama.cpp's choice.
  --serve              Starts the OpenAI-compatible API server for this run.
  --serve-host <addr>  Its address (a key is required off loopback). Defaults to 127.0.0.1.
  --serve-port <n>     Its port. Defaults to the app's setting (8080).
  --calibration <json> Settings of retention calibrations, e.g. '{"prompts": 4, "validationPrompts": 1, "maxTokens": 300}'
                       (keys: prompts, validationPrompts, tokens, maxTokens, seed, hidden, epochs; whole numbers).
                       Defaults to the calibration's own.
  --renderer <dir>     The built page to serve. Defaults to the one beside this file.
  -h, --help           Prints this text.
`;

/** Reads the command line: the options, `help` when asked for, or an error in words (never a throw). */
export function parseHeadlessArgs(
    argv: string[],
    defaults: {renderer: string; home?: string}
): {args: HeadlessArgs} | {help: true} | {error: string} {
    let values: ReturnType<typeof parse>["values"];
    try {
        values = parse(argv).values;
    } catch (err) {
        return {error: (err as Error).message.split("\n")[0]!};
    }
    if (values.help === true) return {help: true};
    const integer = (name: string, value: string | undefined, min: number, max: number): number | undefined | string => {
        if (value == null) return undefined;
        const number = Number(value);
        return Number.isInteger(number) && number >= min && number <= max
            ? number
            : `--${name} must be a whole number from ${min} to ${max}, not ${JSON.stringify(value)}`;
    };
    const port = integer("port", values.port, 0, 65535) ?? 0;
    const seed = integer("seed", values.seed, 0, 2 ** 32 - 1);
    const threads = integer("threads", values.threads, 1, 1024);
    const servePort = integer("serve-port", values["serve-port"], 0, 65535);
    for (const value of [port, seed, threads, servePort]) if (typeof value === "string") return {error: value};
    const calibration = values.calibration == null ? undefined : parseCalibration(values.calibration);
    if (typeof calibration === "string") return {error: calibration};
    return {
        args: {
            dataDir: values["data-dir"] ?? path.join(defaults.home ?? os.homedir(), ".config", "Ponder"),
            renderer: values.renderer ?? defaults.renderer,
            port: port as number,
            token: values.token,
            model: values.model,
            seed: seed as number | undefined,
            threads: threads as number | undefined,
            serve: values.serve === true,
            serveHost: values["serve-host"],
            servePort: servePort as number | undefined,
            calibration
        }
    };
}

/**
 * `--model`'s file checked as the app checks a GGUF model before anything loads it (checkGgufHeader): `null` when it
 * passes, else why not in one line.
 */
export async function checkHeadlessModel(model: string): Promise<string | null> {
    try {
        await checkGgufHeader(path.resolve(model));
        return null;
    } catch (err) {
        return `--model: ${(err as Error).message}`;
    }
}

/** `--calibration`'s JSON: an object of known keys with whole numbers from 1 (0 for `seed`); else the error in words. */
function parseCalibration(text: string): CalibrationArgs | string {
    let value: unknown;
    try {
        value = JSON.parse(text);
    } catch {
        return `--calibration must be a JSON object, not ${JSON.stringify(text)}`;
    }
    if (typeof value !== "object" || value == null || Array.isArray(value))
        return `--calibration must be a JSON object, not ${JSON.stringify(text)}`;
    const out: CalibrationArgs = {};
    for (const [key, number] of Object.entries(value)) {
        if (!(calibrationKeys as readonly string[]).includes(key))
            return `--calibration has no setting "${key}" (it has ${calibrationKeys.join(", ")})`;
        if (!Number.isInteger(number) || (number as number) < (key === "seed" ? 0 : 1) || (number as number) > 1_000_000)
            return `--calibration's ${key} must be a whole number from ${key === "seed" ? 0 : 1} to 1000000, not ${JSON.stringify(number)}`;
        out[key as keyof CalibrationArgs] = number as number;
    }
    return out;
}

function parse(argv: string[]) {
    return parseArgs({
        args: argv,
        strict: true,
        allowPositionals: false,
        options: {
            "data-dir": {type: "string"},
            renderer: {type: "string"},
            port: {type: "string"},
            token: {type: "string"},
            model: {type: "string"},
            seed: {type: "string"},
            threads: {type: "string"},
            serve: {type: "boolean"},
            "serve-host": {type: "string"},
            "serve-port": {type: "string"},
            calibration: {type: "string"},
            help: {type: "boolean", short: "h"}
        }
    });
}
