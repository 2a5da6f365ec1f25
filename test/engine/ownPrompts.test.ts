// Calibration prompts a model writes itself (the user turn of its template sampled from it): the shipped task models,
// calibrated as any other model would be, write questions of their own tasks; the job keeps them so that a resumed job
// thinks the same ones; and a calibration of a model Ponder knows nothing of uses them.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {afterAll, beforeAll, describe, expect, test} from "vitest";
import {resolveChatWrapper, type Llama, type LlamaModel} from "node-llama-cpp";
import {calibrateRetention} from "../../main/engine/calibration/calibrateRetention.js";
import {jobPrompts} from "../../main/engine/calibration/jobPrompts.js";
import {calibrationPrompts} from "../../main/engine/calibration/prompts.js";
import {userTurn, writeOwnPrompts} from "../../main/engine/calibration/ownPrompts.js";
import {loadPatchedLlama} from "../../main/engine/native/loadPatchedLlama.js";
import {findRetentionGates} from "../../main/engine/retention/findRetentionGates.js";
import {inspectModel} from "../../main/engine/runtime/inspectModel.js";
import {getFixtureModel, REPO_ROOT, type FixtureName} from "../fixtures/gguf/fixtures.js";

const models = path.join(REPO_ROOT, "resources", "models");

let llama: Llama;
let dir: string;
const loaded: LlamaModel[] = [];

async function load(file: string): Promise<LlamaModel> {
    const model = await llama.loadModel({modelPath: file});
    loaded.push(model);
    return model;
}

beforeAll(async () => {
    llama = await loadPatchedLlama({gpu: false, logLevel: "error"});
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "ponder-own-prompts-"));
});

afterAll(async () => {
    for (const model of loaded) await model.dispose();
    await llama?.dispose();
    await fs.rm(dir, {recursive: true, force: true});
});

describe("prompts a model writes itself", () => {
    test("the template's user turn is found on every fixture template: its prefix, then the user's text, then its end", async () => {
        for (const name of ["tiny-qwen2", "tiny-llama", "tiny-qwen3"] satisfies FixtureName[]) {
            const model = await load(await getFixtureModel(name));
            const chatWrapper = resolveChatWrapper(model);
            const turn = userTurn(model, chatWrapper);
            const rendered = chatWrapper
                .generateContextState({
                    chatHistory: [
                        {type: "user", text: "Which is larger, 7 or 12?"},
                        {type: "model", response: []}
                    ]
                })
                .contextText.tokenize(model.tokenizer);
            const text = (tokens: readonly number[]) => model.detokenize(tokens as never, true);
            expect(text(rendered).startsWith(text(turn.prefix) + "Which is larger, 7 or 12?" + text([turn.end]))).toBe(true);
            expect(model.isSpecialToken(turn.end)).toBe(true);
        }
    });

    test("the demo model writes demo programs and the merge model merge questions, the same ones for the same seed", async () => {
        const demo = await load(path.join(models, "ponder-demo.gguf"));
        const written = await writeOwnPrompts(demo, 6, {seed: 3, threads: 2, maxTokens: 256});
        const questions = [...written.ended, ...written.unended].map((prompt) => prompt.user);
        expect(questions.length).toBeGreaterThanOrEqual(6);
        // variables with one-digit values, then steps (measured: every one)
        expect(questions.filter((question) => /^([a-z]{1,2}=\d,)+[a-z]{1,2}=\d\n[A-Z]{2}=/.test(question)).length).toBeGreaterThanOrEqual(
            5
        );
        expect(await writeOwnPrompts(demo, 6, {seed: 3, threads: 2, maxTokens: 256})).toEqual(written);
        const other = await writeOwnPrompts(demo, 1, {seed: 4, threads: 2, maxTokens: 256});
        expect([...other.ended, ...other.unended][0]!.user).not.toBe(questions[0]);

        const merge = await load(path.join(models, "ponder-merge.gguf"));
        const lists = await writeOwnPrompts(merge, 6, {seed: 3, threads: 2, maxTokens: 256});
        const mergeQuestions = [...lists.ended, ...lists.unended].map((prompt) => prompt.user);
        expect(
            mergeQuestions.filter((question) => /^a=\d\d(,\d\d)*\nb=\d\d(,\d\d)*\nk=\d\d\?/.test(question)).length
        ).toBeGreaterThanOrEqual(4);
    });

    test("a job keeps its questions: resumed, it reads them instead of sampling again", async () => {
        const demo = await load(path.join(models, "ponder-demo.gguf"));
        const work = path.join(dir, "job");
        await fs.mkdir(work, {recursive: true});
        const settings = {promptSet: "own" as const, prompts: 3, validationPrompts: 2, seed: 0};
        const lines: string[] = [];
        const first = await jobPrompts(demo, settings, work, {threads: 2, onLog: (line) => lines.push(line), onProgress: () => undefined});
        expect(first.set).toBe("own");
        expect(first.prompts).toHaveLength(3);
        expect(first.heldOut).toHaveLength(2);
        // held out: never among the prompts thought through, and sampled in a draw of their own
        for (const prompt of first.heldOut) expect(first.prompts.map((p) => p.user)).not.toContain(prompt.user);
        for (const prompt of first.prompts) expect(prompt.seed).toBeLessThan(100_000);
        for (const prompt of first.heldOut) expect(prompt.seed).toBeGreaterThanOrEqual(100_000);
        expect(lines.join("\n")).toMatch(/the model wrote its 5 questions in \d+ tries/);
        // a model that must not be asked: the saved questions are read
        const untouchable = new Proxy({} as LlamaModel, {
            get() {
                throw new Error("the model was asked again");
            }
        });
        expect(await jobPrompts(untouchable, settings, work, {onLog: () => undefined, onProgress: () => undefined})).toEqual(first);
        // a damaged file is written again, not trusted
        await fs.writeFile(path.join(work, "prompts.json"), "{not json");
        expect(await jobPrompts(demo, settings, work, {threads: 2, onLog: () => undefined, onProgress: () => undefined})).toEqual(first);
    });

    test("a calibration on a person's prompts thinks through the first ones, holds the last out, and says so in the gates", async () => {
        const copy = path.join(dir, "their-demo.gguf");
        await fs.copyFile(path.join(models, "ponder-demo.gguf"), copy);
        const model = await load(copy);
        const list = calibrationPrompts("demo", 4, 7).map((prompt) => prompt.user);
        const result = await calibrateRetention({
            model,
            modelPath: copy,
            promptSet: "file",
            promptList: list,
            prompts: 8,
            validationPrompts: 1,
            tokens: 4096,
            epochs: 2,
            hidden: 16,
            readThresholds: [0.5],
            horizonWeights: [1],
            workDir: path.join(dir, "work-file"),
            threads: 2
        });
        expect(result.promptSet).toBe("file");
        expect(result.prompts).toBe(3);
        expect(result.validation.prompts).toBe(1);
        if (!result.installed) return; // a refusal is the validation's to make
        const found = await findRetentionGates({...(await inspectModel(copy)), path: copy});
        expect(found.available && found.info.calibration?.promptSet).toBe("file");
    }, 300_000);

    test("a calibration of a model Ponder does not know thinks on questions it wrote, and says so in the gates", async () => {
        // a copy of the merge model under another name, calibrated as "own": as any model would be
        const copy = path.join(dir, "someone-elses-model.gguf");
        await fs.copyFile(path.join(models, "ponder-merge.gguf"), copy);
        const model = await load(copy);
        const stages: string[] = [];
        const result = await calibrateRetention({
            model,
            modelPath: copy,
            promptSet: "own",
            prompts: 4,
            validationPrompts: 2,
            tokens: 4096,
            epochs: 2,
            hidden: 16,
            readThresholds: [0.25],
            horizonWeights: [1],
            workDir: path.join(dir, "work"),
            threads: 2,
            onProgress: (p) => stages.push(`${p.stage} ${p.done}/${p.total}`)
        });
        expect(result.promptSet).toBe("own");
        // the questions are written first, counted, then thought through
        expect(stages[0]).toMatch(/^questions \d\/6$/);
        expect(stages.indexOf("questions 6/6")).toBeLessThan(stages.findIndex((stage) => stage.startsWith("thinking")));
        expect(result.prompts).toBe(4);
        if (!result.installed) return; // a refusal is the validation's to make; what was thought is checked above
        const found = await findRetentionGates({...(await inspectModel(copy)), path: copy});
        expect(found.available).toBe(true);
        if (!found.available) return;
        expect(found.info.calibration?.promptSet).toBe("own");
        expect(found.info.source).toMatch(/^ponder calibrate: 4 prompts the model wrote/);
    }, 300_000);
});
