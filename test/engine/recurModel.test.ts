// The recurrence model of the bench (llama, grouped-query attention): a question of two values and a name, a thought
// of 60 to 120 lines that reads its own lines up to half the thought back. Its question is 2 to 3% of a conversation.
// At a quarter of Full's cells, per-head cells (each (layer, KV head) its own tokens in the same number of cells) keep
// answers that shared cells (one set of tokens for every head) lose, with the same gates (made by the app's
// calibration, fitted per KV head) and the same number of cells. Measured on the committed files, 6 held-out problems:
// Full 6 right with the generator's thought; TRIM-KV at a quarter on per-head cells 5 right, on shared cells 1.
// Greedy on one thread, so the outcome is fixed for a given model and build.
import fs from "node:fs/promises";
import path from "node:path";
import {afterAll, describe, expect, it} from "vitest";
import {Engine} from "../../main/engine/runtime/Engine.js";
import {inspectModel} from "../../main/engine/runtime/inspectModel.js";
import {loadRuntime} from "../../main/engine/runtime/loadRuntime.js";
import {findRetentionGates} from "../../main/engine/retention/findRetentionGates.js";
import {heldOutRecurProblems} from "../eval/recurTask.js";
import {REPO_ROOT} from "../fixtures/gguf/fixtures.js";
import {heldOutScorer} from "./greedyAnswer.js";

const recurModel = path.join(REPO_ROOT, "test", "eval", "models", "ponder-recur.gguf");
// Held-out problems (seeds from 2^31 on, past the bench's first 32).
const problems = heldOutRecurProblems(6, {}, 100);

describe("the recurrence model", () => {
    it("is small, llama with fewer key/value heads than query heads, with per-head gates", async () => {
        const {size} = await fs.stat(recurModel);
        expect(size).toBeLessThan(8 * 2 ** 20);
        const inspection = await inspectModel(recurModel);
        expect(inspection).toMatchObject({architecture: "llama", name: "Ponder Recurrence Reasoner", hasChatTemplate: true});
        expect(inspection.headCountKv).toBeLessThan(inspection.headCount!);
        const gates = await findRetentionGates(inspection);
        expect(gates.available).toBe(true);
        if (gates.available) expect(gates.info.reduction).toBe("per-head");
    });

    describe("through the engine, greedy", () => {
        const engine = new Engine({loadLlama: loadRuntime, threads: 1});
        afterAll(() => engine.dispose());
        const {fullCells, promptTokens, score} = heldOutScorer(engine, problems);

        it("thinks held-out problems through with Full KV, line for line, and answers them", async () => {
            await engine.loadModel(recurModel, null);
            const full = await score("full", 1);
            expect(full.right, JSON.stringify(full.rows)).toBe(problems.length);
            expect(full.same, JSON.stringify(full.rows)).toBe(problems.length);
            // the question (with the chat template's tokens around it) is a small part of what the model reads
            for (const [index, prompt] of promptTokens.entries()) expect(prompt / fullCells[index]!).toBeLessThan(0.05);
        });

        it("keeps answers on per-head cells at a quarter of the cells where shared cells lose them, with the same gates", async () => {
            expect(fullCells).toHaveLength(problems.length);
            const heads = await score("trimkv", 0.25, {combine: "heads"});
            const shared = await score("trimkv", 0.25, {combine: "aggregate"});
            expect(heads.right, JSON.stringify(heads.rows)).toBeGreaterThanOrEqual(4);
            expect(shared.right, JSON.stringify(shared.rows)).toBeLessThanOrEqual(2);
        });
    });
});
