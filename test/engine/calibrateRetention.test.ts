// The calibration of retention gates on the demo model (`calibrateRetention`): the model thinks on calibration prompts
// as it answers; validation refuses gates that do worse than Lethe; a cancelled job goes on from the prompts it kept
// and ends with the gates an uninterrupted run makes; `npm run calibrate` writes a sidecar beside a copy of the model
// that findRetentionGates accepts, with its provenance.
import {execFile} from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {promisify} from "node:util";
import {afterAll, beforeAll, describe, expect, test} from "vitest";
import {resolveChatWrapper, type Llama, type LlamaModel, type Token} from "node-llama-cpp";
import {extractDemoAnswer, generateDemoProblem} from "../../main/demo/demoTask.js";
import {collectCalibrationData} from "../../main/engine/calibration/collectCalibrationData.js";
import {NativeKv} from "../../main/engine/native/NativeKv.js";
import {calibrateRetention} from "../../main/engine/calibration/calibrateRetention.js";
import {calibrationPrompts} from "../../main/engine/calibration/prompts.js";
import {validateCandidates} from "../../main/engine/calibration/validateCandidates.js";
import {loadPatchedLlama} from "../../main/engine/native/loadPatchedLlama.js";
import {checkRetentionFile, findRetentionGates, retentionSidecarPath} from "../../main/engine/retention/findRetentionGates.js";
import {inspectModel} from "../../main/engine/runtime/inspectModel.js";
import {REPO_ROOT} from "../fixtures/gguf/fixtures.js";
import {writeRetentionSidecar} from "../fixtures/gguf/retentionSidecar.js";
import {gguf} from "../../main/engine/gguf/writeGguf.js";
import type {CalibrationJobProgress, ValidationReport} from "../../main/engine/calibration/types.js";

const demoModel = path.join(REPO_ROOT, "resources", "models", "ponder-demo.gguf");
const shippedGates = path.join(REPO_ROOT, "resources", "models", "ponder-demo.retention.gguf");
/** Small and quick: three short thoughts, two held-out ones, one candidate (what is resumed does not depend on their count). */
const quick = {
    prompts: 3,
    validationPrompts: 2,
    tokens: 4096,
    epochs: 3,
    hidden: 16,
    maxTokens: 3000,
    readThresholds: [0.5],
    horizonWeights: [1]
};

let llama: Llama;
let model: LlamaModel;
let dir: string;
let modelCopy: string;

beforeAll(async () => {
    llama = await loadPatchedLlama({gpu: false, logLevel: "error"});
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "ponder-calibrate-"));
    // a copy without the shipped gates beside it: the calibration alone makes them
    modelCopy = path.join(dir, "ponder-demo.gguf");
    await fs.copyFile(demoModel, modelCopy);
    model = await llama.loadModel({modelPath: modelCopy});
});

afterAll(async () => {
    await model?.dispose();
    await llama?.dispose();
    await fs.rm(dir, {recursive: true, force: true});
});

/** The gate tensors of a sidecar: its last `weightBytes` bytes (the metadata before them holds dates and times). */
async function tensorBytes(file: string): Promise<Buffer> {
    const found = await checkRetentionFile(file, {...(await inspectModel(modelCopy)), path: modelCopy});
    expect(found.available).toBe(true);
    const bytes = await fs.readFile(file);
    return bytes.subarray(bytes.length - (found.available ? found.info.weightBytes : 0));
}

describe("calibrating the demo model's retention gates", () => {
    test("the model thinks on a calibration prompt as it answers: the thought opened as an answer opens it, ended by the model", async () => {
        const problem = generateDemoProblem(calibrationPrompts("demo", 1, 0, true)[0]!.seed, {minSteps: 8, maxSteps: 12});
        const context = await model.createContext({contextSize: 1024, flashAttention: false, threads: 2});
        const kv = new NativeKv(context);
        try {
            const data = await collectCalibrationData(
                {model, chatWrapper: resolveChatWrapper(model), sequence: context.getSequence(), kv},
                [{user: problem.question}],
                {maxTokens: 600, maxSamples: 16}
            );
            const text = data.texts[0]!;
            expect(text.stop).toBe("eog");
            const written = model.detokenize(Array.from(text.tokens.subarray(text.promptTokens)) as Token[], true);
            expect(written).toContain(problem.thinking);
            expect(extractDemoAnswer(written)).toBe(problem.answer);
        } finally {
            await kv.dispose();
            await context.dispose();
        }
    });

    test("validation refuses gates that do worse than Lethe, and passes the shipped ones, scoring the answers apart", async () => {
        const prompts = calibrationPrompts("demo", 2, 0, true).map((p) => p.user);
        const random = path.join(dir, "random.retention.gguf");
        // gates of random weights: they keep and drop cells without regard to what the thought reads
        const randomSpec = {
            modelPath: modelCopy,
            architecture: "llama",
            layers: 4,
            width: 128,
            kvHeads: 4,
            hidden: 16,
            seed: 3,
            biasRange: [-2, 2] as [number, number],
            weightScale: 1
        };
        await writeRetentionSidecar(random, randomSpec);
        // the same gates labelled as fitted per head are validated on per-head cells, as the app would use them
        const perHead = path.join(dir, "random-per-head.retention.gguf");
        await writeRetentionSidecar(perHead, {...randomSpec, overrides: {"ponder.retention.reduction": gguf.string("per-head")}});
        // one validation of the three (Full's thoughts and Lethe's runs are shared), its reports in the candidates' order
        const [bad, badPerHead, good] = await validateCandidates({
            model,
            prompts,
            candidates: [random, perHead, shippedGates],
            maxTokens: 3000,
            threads: 2
        });
        expect(bad!.prompts).toBe(2);
        expect(bad!.passed).toBe(false);
        expect(badPerHead!.points.map((point) => point.gates)).not.toEqual(bad!.points.map((point) => point.gates));
        expect(good!.passed).toBe(true);
        for (const point of good!.points) expect(point.gates).toBeGreaterThan(bad!.points.find((p) => p.share === point.share)!.gates);
        // both held-out thoughts end and answer: the answer's tokens are scored apart
        expect(good!.answerTokens).toBeGreaterThan(0);
        expect(good!.answerTokens).toBeLessThan(good!.tokens / 10);
        for (const point of good!.points) expect(point.answers?.gates).toBeGreaterThanOrEqual(point.answers!.lethe);
    });

    test("a cancelled calibration goes on from the prompts it kept and makes the gates an uninterrupted run makes", async () => {
        const whole = await calibrateRetention({
            model,
            modelPath: modelCopy,
            promptSet: "demo",
            ...quick,
            out: path.join(dir, "whole.gguf"),
            workDir: path.join(dir, "work-a"),
            threads: 2
        });
        expect(whole.validation.prompts).toBe(2);

        const workDir = path.join(dir, "work-b");
        const out = path.join(dir, "resumed.gguf");
        const controller = new AbortController();
        const first: CalibrationJobProgress[] = [];
        await expect(
            calibrateRetention({
                model,
                modelPath: modelCopy,
                promptSet: "demo",
                ...quick,
                out,
                workDir,
                threads: 2,
                signal: controller.signal,
                onProgress(p) {
                    first.push(p);
                    if (p.stage === "thinking" && p.done >= 2) controller.abort(new Error("cancelled"));
                }
            })
        ).rejects.toThrow("cancelled");
        await expect(fs.access(out)).rejects.toThrow();
        const [job] = await fs.readdir(workDir);
        expect((await fs.readdir(path.join(workDir, job!))).filter((name) => name.endsWith(".cal"))).toHaveLength(2);

        const second: CalibrationJobProgress[] = [];
        const resumed = await calibrateRetention({
            model,
            modelPath: modelCopy,
            promptSet: "demo",
            ...quick,
            out,
            workDir,
            threads: 2,
            onProgress: (p) => second.push(p)
        });
        expect(second[0]!.resumed).toBe(2);
        expect(second.filter((p) => p.stage === "thinking").every((p) => p.done >= 2)).toBe(true);
        expect(resumed.tokensSeen).toBe(whole.tokensSeen);
        expect(resumed.trainLoss).toEqual(whole.trainLoss);
        expect(resumed.readThreshold).toBe(whole.readThreshold);
        expect(resumed.validation.points).toEqual(whole.validation.points);
        if (whole.installed) {
            expect(resumed.installed).toBe(true);
            expect((await tensorBytes(out)).equals(await tensorBytes(whole.out))).toBe(true);
        }
        // a finished job leaves no work behind
        expect(await fs.readdir(workDir)).toEqual([]);
    }, 900_000);

    test("npm run calibrate leaves the gates beside the model as they were when its gates do worse than Lethe, and replaces them (kept as .previous) when they do better", async () => {
        const sidecar = retentionSidecarPath(modelCopy);
        await fs.copyFile(shippedGates, sidecar);
        const cli = (args: string[]) =>
            promisify(execFile)(
                "npx",
                [
                    "tsx",
                    "scripts/calibrate.ts",
                    "--model",
                    modelCopy,
                    "--validation",
                    "2",
                    "--work-dir",
                    path.join(dir, "work-cli"),
                    "--threads",
                    "2",
                    ...args
                ],
                {cwd: REPO_ROOT}
            );

        // gates that barely trained (one width-1 layer, one pass over 64 tokens) rank cells by age alone
        // one candidate a run (a read threshold, a horizon weight): the choice among several is the e2e calibration's
        const one = ["--read-thresholds", "0.5", "--horizon-weights", "1"];
        const refused = await cli(["--prompts", "2", "--tokens", "64", "--epochs", "1", "--hidden", "1", ...one]).then(
            () => null,
            (err: {code: number; stdout: string; stderr: string}) => err
        );
        expect(refused?.code).toBe(2);
        expect((JSON.parse(refused!.stdout) as {installed: boolean; refusal: string}).refusal).toMatch(
            /do worse than Lethe on 2 held-out prompts \(top-1 agreement with Full at 25%: 0\.\d+, Lethe 0\.\d+/
        );
        expect((await fs.readFile(sidecar)).equals(await fs.readFile(shippedGates))).toBe(true);
        // the model's thinking stays for another try: one that trains otherwise thinks nothing again
        const [job] = await fs.readdir(path.join(dir, "work-cli"));
        const kept = path.join(dir, "work-cli", job!);
        expect((JSON.parse(refused!.stdout) as {workKept: string}).workKept).toBe(kept);
        expect((await fs.readdir(kept)).filter((name) => name.endsWith(".cal"))).toHaveLength(2);
        expect(refused!.stderr).toMatch(/thinking 2\/2: /);
        const retrained = await cli(["--prompts", "2", "--tokens", "64", "--epochs", "1", "--hidden", "2", ...one]).then(
            (done) => done,
            (err: {stdout: string; stderr: string}) => err
        );
        expect(retrained.stderr).toMatch(/\(2 resumed\)/);
        expect(retrained.stderr).not.toMatch(/thinking \d\/2: /);
        expect((JSON.parse(retrained.stdout) as {tokensSeen: number}).tokensSeen).toBe(
            (JSON.parse(refused!.stdout) as {tokensSeen: number}).tokensSeen
        );

        const {stdout, stderr} = await cli(["--prompts", "8", "--tokens", "16384", "--keep-work", ...one]);
        const result = JSON.parse(stdout) as {
            installed: boolean;
            prompts: number;
            tokensSeen: number;
            out: string;
            backup: string;
            workKept: string | null;
        };
        expect(result.installed).toBe(true);
        // --keep-work: installed gates leave the model's thinking in place too
        expect(result.workKept).not.toBeNull();
        expect((await fs.readdir(result.workKept!)).filter((name) => name.endsWith(".cal"))).toHaveLength(8);
        expect(stderr).toContain(`is kept in ${result.workKept}`);
        expect(result.out).toBe(sidecar);
        expect((await fs.readFile(result.backup)).equals(await fs.readFile(shippedGates))).toBe(true);
        const found = await findRetentionGates({...(await inspectModel(modelCopy)), path: modelCopy});
        expect(found.available).toBe(true);
        if (!found.available) return;
        expect(found.info.source).toMatch(/^ponder calibrate: 8 demo-task prompts/);
        expect(found.info.calibration?.promptSet).toBe("demo");
        expect(found.info.calibration?.prompts).toBe(8);
        expect(found.info.calibration?.tokens).toBe(result.tokensSeen);
        const points = found.info.calibration?.validation?.points ?? [];
        expect(points.map((p) => p.share)).toEqual([0.25, 0.5]);
        for (const point of points) expect(point.answers).toEqual({gates: expect.any(Number), lethe: expect.any(Number)});
        // the numbers the validation passed them on are the ones recorded
        const validation = (JSON.parse(stdout) as {validation: ValidationReport}).validation;
        expect(validation.passed).toBe(true);
        expect(points).toEqual(
            validation.points.map((p) => ({
                ...p,
                gates: expect.closeTo(p.gates, 6),
                lethe: expect.closeTo(p.lethe, 6),
                answers: p.answers && {gates: expect.closeTo(p.answers.gates, 6), lethe: expect.closeTo(p.answers.lethe, 6)}
            }))
        );
    }, 900_000);
});
