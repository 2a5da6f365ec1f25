import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import {choosePromptSet} from "../../../main/engine/retention/choosePromptSet.js";

describe("choosePromptSet", () => {
    let dir: string;
    const file = (name: string) => path.join(dir, name);
    beforeAll(async () => {
        dir = await fs.mkdtemp(path.join(os.tmpdir(), "ponder-prompt-set-"));
        await fs.mkdir(file("shipped"));
        await fs.mkdir(file("elsewhere"));
        await fs.writeFile(file("shipped/ponder-demo.gguf"), "the demo model's bytes");
        await fs.writeFile(file("shipped/ponder-merge.gguf"), "the merge model's bytes");
        await fs.writeFile(file("shipped/ponder-multi.gguf"), "the many-task model's bytes");
        await fs.copyFile(file("shipped/ponder-multi.gguf"), file("elsewhere/multi-copy.gguf"));
        await fs.copyFile(file("shipped/ponder-demo.gguf"), file("elsewhere/demo-copy.gguf"));
        await fs.copyFile(file("shipped/ponder-merge.gguf"), file("elsewhere/merge-copy.gguf"));
        await fs.writeFile(file("elsewhere/other.gguf"), "another model's bytes");
    });
    afterAll(() => fs.rm(dir, {recursive: true, force: true}));

    it("gives each shipped task model, or a copy of it anywhere, its own task, and any other model questions it writes itself", async () => {
        const bundled = file("shipped/ponder-demo.gguf");
        expect(await choosePromptSet(bundled, bundled)).toBe("demo");
        expect(await choosePromptSet(file("elsewhere/demo-copy.gguf"), bundled)).toBe("demo");
        expect(await choosePromptSet(file("shipped/ponder-merge.gguf"), bundled)).toBe("merge");
        expect(await choosePromptSet(file("elsewhere/merge-copy.gguf"), bundled)).toBe("merge");
        expect(await choosePromptSet(file("shipped/ponder-multi.gguf"), bundled)).toBe("multi");
        expect(await choosePromptSet(file("elsewhere/multi-copy.gguf"), bundled)).toBe("multi");
        expect(await choosePromptSet(file("elsewhere/other.gguf"), bundled)).toBe("own");
        expect(await choosePromptSet(file("elsewhere/merge-copy.gguf"), null)).toBe("own");
        // whichever of them a fresh install loads
        const first = file("shipped/ponder-multi.gguf");
        expect(await choosePromptSet(file("elsewhere/demo-copy.gguf"), first)).toBe("demo");
        expect(await choosePromptSet(file("elsewhere/multi-copy.gguf"), first)).toBe("multi");
        expect(await choosePromptSet(file("elsewhere/other.gguf"), first)).toBe("own");
    });

    it("gives its own questions when the shipped models are missing", async () => {
        expect(await choosePromptSet(file("elsewhere/other.gguf"), file("nowhere/ponder-demo.gguf"))).toBe("own");
    });
});
