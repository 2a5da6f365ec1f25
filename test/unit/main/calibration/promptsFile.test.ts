import {describe, expect, it} from "vitest";
import type {LlamaModel} from "node-llama-cpp";
import {jobPrompts} from "../../../../main/engine/calibration/jobPrompts.js";
import {parsePromptsFile, promptsFileLimits} from "../../../../main/engine/calibration/promptsFile.js";

describe("a person's calibration prompts from a file", () => {
    it("reads JSON Lines (strings, or objects with a prompt or user string) and plain text, a prompt per line", () => {
        expect(parsePromptsFile('"What is 2 + 3?"\n{"prompt": "Sort 3, 1, 2.\\nShow each step."}\n\n{"user": "Name a prime."}\n')).toEqual([
            "What is 2 + 3?",
            "Sort 3, 1, 2.\nShow each step.",
            "Name a prime."
        ]);
        expect(parsePromptsFile("\uFEFFWhat is 2 + 3?\r\n\r\n  Name a prime.  \r\n")).toEqual(["What is 2 + 3?", "Name a prime."]);
    });

    it("refuses what is not a prompt, saying on which line", () => {
        expect(() => parsePromptsFile('"one"\n{"prompt": 3}\n')).toThrow(/line 2: neither a string nor an object with a "prompt" string/);
        expect(() => parsePromptsFile('"one"\n{not json\n')).toThrow(/line 2: not JSON/);
        expect(() => parsePromptsFile('"one"\n["a list"]\n')).toThrow(/line 2: neither a string/);
        expect(() => parsePromptsFile('"one"\n"  "\n')).toThrow(/line 2: an empty prompt/);
        expect(() => parsePromptsFile(`"${"x".repeat(promptsFileLimits.characters + 1)}"`)).toThrow(/line 1: a prompt of 32769 characters/);
        expect(() => parsePromptsFile("\n \n")).toThrow(/no prompts/);
        expect(() => parsePromptsFile("q\n".repeat(promptsFileLimits.prompts + 1))).toThrow(/more than 10000 prompts/);
    });

    it("thinks through the first prompts and holds the last ones out, without asking the model anything", async () => {
        const untouchable = new Proxy({} as LlamaModel, {
            get() {
                throw new Error("the model was asked");
            }
        });
        const options = {onLog: () => undefined, onProgress: () => undefined};
        const list = ["a", "b", "c", "d", "e", "f"];
        const job = await jobPrompts(
            untouchable,
            {promptSet: "file", prompts: 3, validationPrompts: 2, seed: 0, promptList: list},
            "/nowhere",
            options
        );
        expect(job.set).toBe("file");
        expect(job.prompts.map((p) => p.user)).toEqual(["a", "b", "c"]);
        expect(job.heldOut.map((p) => p.user)).toEqual(["e", "f"]);
        const all = await jobPrompts(
            untouchable,
            {promptSet: "file", prompts: 32, validationPrompts: 2, seed: 0, promptList: list},
            "/nowhere",
            options
        );
        expect(all.prompts.map((p) => p.user)).toEqual(["a", "b", "c", "d"]);
        await expect(
            jobPrompts(untouchable, {promptSet: "file", prompts: 32, validationPrompts: 8, seed: 0, promptList: list}, "/nowhere", options)
        ).rejects.toThrow(/6 prompts given: at least 9 are needed \(8 held out for the validation\)/);
    });
});
