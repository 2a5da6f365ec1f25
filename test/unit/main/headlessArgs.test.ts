import {describe, expect, it} from "vitest";
import {headlessUsage, parseHeadlessArgs} from "../../../main/headlessArgs.js";

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
