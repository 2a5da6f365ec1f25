import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import {checkHeadlessModel, headlessUsage, parseHeadlessArgs} from "../../../main/headlessArgs.js";

const defaults = {renderer: "/app/out/renderer", home: "/home/u"};

describe("the headless command line", () => {
    it("reads the options, with their defaults", () => {
        expect(parseHeadlessArgs([], defaults)).toEqual({
            args: {
                dataDir: "/home/u/.config/Ponder",
                renderer: "/app/out/renderer",
                port: 0,
                serve: false,
                token: undefined,
                model: undefined,
                seed: undefined,
                threads: undefined,
                serveHost: undefined,
                servePort: undefined
            }
        });
        expect(
            parseHeadlessArgs(["--data-dir", "/d", "--seed", "7", "--serve", "--serve-port", "9000", "--threads=2"], defaults)
        ).toMatchObject({args: {dataDir: "/d", seed: 7, serve: true, servePort: 9000, threads: 2}});
    });

    it("answers --help and -h with the usage", () => {
        expect(parseHeadlessArgs(["--help"], defaults)).toEqual({help: true});
        expect(parseHeadlessArgs(["-h"], defaults)).toEqual({help: true});
        expect(headlessUsage).toContain("--serve-port");
    });

    it("names an unknown flag, a missing value or a bad number in one line, without throwing", () => {
        expect(parseHeadlessArgs(["--frobnicate"], defaults)).toEqual({error: expect.stringMatching(/Unknown option '--frobnicate'/)});
        expect(parseHeadlessArgs(["--port"], defaults)).toEqual({error: expect.stringMatching(/--port/)});
        expect(parseHeadlessArgs(["--port", "99999"], defaults)).toEqual({
            error: '--port must be a whole number from 0 to 65535, not "99999"'
        });
        expect(parseHeadlessArgs(["--seed", "abc"], defaults)).toMatchObject({error: expect.stringMatching(/--seed/)});
        expect(parseHeadlessArgs(["stray"], defaults)).toMatchObject({error: expect.stringMatching(/stray/)});
    });

    it("reads the retention calibration's settings as JSON, and refuses an unknown key or a bad number in words", () => {
        expect(
            parseHeadlessArgs(["--calibration", '{"prompts": 4, "validationPrompts": 1, "maxTokens": 300, "seed": 0}'], defaults)
        ).toMatchObject({args: {calibration: {prompts: 4, validationPrompts: 1, maxTokens: 300, seed: 0}}});
        expect(parseHeadlessArgs(["--calibration", "4"], defaults)).toEqual({error: '--calibration must be a JSON object, not "4"'});
        expect(parseHeadlessArgs(["--calibration", '{"out": 1}'], defaults)).toEqual({error: expect.stringMatching(/no setting "out"/)});
        expect(parseHeadlessArgs(["--calibration", '{"prompts": 0}'], defaults)).toEqual({
            error: expect.stringMatching(/prompts must be a whole number from 1/)
        });
    });
});

describe("the headless mode's --model, checked before anything starts", () => {
    let dir: string;
    const demo = path.resolve(import.meta.dirname, "../../../resources/models/ponder-demo.gguf");

    beforeAll(async () => {
        dir = await fs.mkdtemp(path.join(os.tmpdir(), "ponder-headless-model-"));
        await fs.writeFile(path.join(dir, "notes.gguf"), "not a model at all\n".repeat(4));
    });

    afterAll(async () => {
        await fs.rm(dir, {recursive: true, force: true});
    });

    it("passes a GGUF model and names a missing or non-GGUF file in one line, with the app's own GGUF check", async () => {
        expect(await checkHeadlessModel(demo)).toBeNull();
        const missing = path.join(dir, "missing.gguf");
        expect(await checkHeadlessModel(missing)).toBe(`--model: ${missing} does not exist`);
        expect(await checkHeadlessModel(path.join(dir, "notes.gguf"))).toBe(
            "--model: notes.gguf is not a GGUF model file (it does not start with the GGUF signature)"
        );
    });
});
