// Retention calibration from the app (`CalibrationService`): models:calibrate starts the engine's job and answers at
// once, its progress and end arrive as models:calibration events, a second job and a model that cannot calibrate are
// refused with their codes, cancel stops the job; and the engine process's protocol carries the progress and the
// cancel.
import os from "node:os";
import path from "node:path";
import {describe, expect, it} from "vitest";
import type {CalibrationStatus, Events} from "../../../preload/contract.js";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {createDispatch} from "../../../main/ipc/dispatch.js";
import {createHandlers} from "../../../main/ipc/handlers.js";
import {EngineProxy} from "../../../main/engine/host/EngineProxy.js";
import {modelFingerprint} from "../../../main/engine/retention/modelFingerprint.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {getFixtureModel} from "../../fixtures/gguf/fixtures.js";
import {FakeEngine} from "./FakeEngine.js";
import {memoryEngines, until} from "./memoryEngines.js";

const workDir = path.join(os.tmpdir(), "ponder-calibration-test");

async function setup(configure: (engine: FakeEngine) => void = () => {}) {
    const engine = new FakeEngine();
    configure(engine);
    const events: CalibrationStatus[] = [];
    const emit = (channel: keyof Events, payload: unknown) => {
        if (channel === "models:calibration") events.push(payload as CalibrationStatus);
    };
    const services = new AppServices(new AppDatabase(":memory:"), engine.asEngine(), emit, {
        version: "t",
        modelsDir: "/tmp/x",
        calibration: {workDir, progressMs: 0}
    });
    const dispatch = createDispatch(createHandlers(services, {openExternal: async () => {}, pickModelFile: async () => null}));
    const model = await services.models.add(await getFixtureModel("tiny-qwen3"));
    return {engine, services, dispatch, events, model};
}

describe("retention calibration from the app", () => {
    it("loads the model, runs the engine's job in the model's work folder and reports its stages, time left and result", async () => {
        const {engine, dispatch, events, model} = await setup((e) => e.calibrationSteps.push({...e.calibrationSteps[0]!, done: 1.5}));
        const started = await dispatch("models:calibrate", {id: model.id});
        expect(started).toMatchObject({ok: true, value: {modelId: model.id, state: "running"}});
        await until(() => events.at(-1)?.state !== "running");
        expect(engine.loads.map((load) => load.path)).toEqual([model.path]);
        expect(engine.calibrations[0]).toMatchObject({
            modelPath: model.path,
            promptSet: "own",
            workDir: path.join(workDir, await modelFingerprint(model.path))
        });
        expect(events.filter((e) => e.state === "running").map((e) => [e.stage, e.step, e.of, e.etaSeconds, e.message])).toEqual([
            ["starting", 0, 1, null, `Starting the calibration of ${model.name}`],
            ["thinking", 0, 2, null, "Thinking 1/2"],
            ["thinking", 1, 2, 30, "Thinking 2/2"],
            ["training", 4, 8, 12, "Training the gates (50%)"],
            ["validating", 1, 4, 6, "Validating against Lethe 1/4"],
            // a step without an estimate (within a prompt) keeps the last one, less the time since
            ["thinking", 1, 2, 6, "Thinking 2/2"]
        ]);
        expect(events.at(-1)).toMatchObject({
            state: "installed",
            result: {
                installed: true,
                // the set the job used (the fake engine's), not the one asked for ("own")
                promptSet: "demo",
                prompts: 2,
                tokens: 800,
                samples: 600,
                seconds: 42,
                validation: {
                    prompts: 2,
                    tokens: 300,
                    points: [
                        {share: 0.25, gates: 0.97, lethe: 0.86, answers: {gates: 0.9, lethe: 0.4}},
                        {share: 0.5, gates: 0.99, lethe: 0.95, answers: {gates: 1, lethe: 0.6}}
                    ]
                }
            }
        });
        expect(await dispatch("models:calibrationStatus", undefined)).toMatchObject({ok: true, value: {state: "installed"}});
    });

    it("refuses a second job while one runs, cancels the running one, and then starts again", async () => {
        const {engine, dispatch, events, model} = await setup((e) => (e.calibrationStepMs = 40));
        expect(await dispatch("models:calibrate", {id: model.id})).toMatchObject({ok: true});
        const second = await dispatch("models:calibrate", {id: model.id});
        expect(second).toMatchObject({ok: false, error: {code: "BUSY"}});
        expect(!second.ok && second.error.message).toMatch(/already running/);
        expect(await dispatch("models:calibrateCancel", undefined)).toEqual({ok: true, value: undefined});
        await until(() => events.at(-1)?.state !== "running");
        expect(events.at(-1)).toMatchObject({state: "cancelled", result: null});
        expect(engine.calibrations[0]!.signal.aborted).toBe(true);
        engine.calibrationStepMs = 1;
        expect(await dispatch("models:calibrate", {id: model.id})).toMatchObject({ok: true});
        await until(() => events.at(-1)?.state !== "running");
        expect(events.at(-1)!.state).toBe("installed");
    });

    it("says how many of its own questions a model has written before it thinks", async () => {
        const {dispatch, events, model} = await setup((e) =>
            e.calibrationSteps.unshift({stage: "questions", done: 3, total: 40, elapsed: 0, remaining: null, resumed: 0, tokensSeen: 0})
        );
        await dispatch("models:calibrate", {id: model.id});
        await until(() => events.at(-1)?.state !== "running");
        expect(events.find((e) => e.stage === "questions")).toMatchObject({
            state: "running",
            step: 3,
            of: 40,
            etaSeconds: null,
            message: "Writing its own questions 3/40"
        });
    });

    it("says in numbers why gates that did worse than Lethe were not installed", async () => {
        const refusal =
            "The calibrated gates do worse than Lethe on 2 held-out prompts (top-1 agreement with Full at 25%: 0.610, Lethe 0.860): not installed";
        const {dispatch, events, model} = await setup((e) => (e.calibrationResult = {...e.calibrationResult, installed: false, refusal}));
        await dispatch("models:calibrate", {id: model.id});
        await until(() => events.at(-1)?.state !== "running");
        expect(events.at(-1)).toMatchObject({state: "refused", message: refusal, result: {installed: false}});
    });

    it("draws a model's own questions again with the next seed after they were refused", async () => {
        const {engine, dispatch, events, model} = await setup(
            (e) => (e.calibrationResult = {...e.calibrationResult, promptSet: "own", installed: false, refusal: "worse"})
        );
        for (let run = 0; run < 3; run++) {
            await dispatch("models:calibrate", {id: model.id});
            await until(() => events.at(-1)?.state !== "running");
        }
        expect(engine.calibrations.map((c) => [c.promptSet, c.seed])).toEqual([
            ["own", undefined],
            ["own", 1],
            ["own", 2]
        ]);
    });

    it("refuses a model whose architecture cannot be calibrated, an unknown model and a malformed request", async () => {
        const {services, dispatch, engine, model} = await setup();
        const row = services.db.models.get(model.id)!;
        services.db.models.upsert({...row, architecture: "gemma2"});
        const refused = await dispatch("models:calibrate", {id: model.id});
        expect(refused).toMatchObject({ok: false, error: {code: "CANNOT_CALIBRATE"}});
        expect(!refused.ok && refused.error.message).toMatch(/cannot be calibrated: .*sliding-window attention/);
        expect(await dispatch("models:calibrate", {id: "missing"})).toMatchObject({ok: false, error: {code: "NOT_FOUND"}});
        expect(await dispatch("models:calibrate", {id: model.id, prompts: 3} as never)).toMatchObject({
            ok: false,
            error: {code: "BAD_REQUEST"}
        });
        expect(engine.calibrations).toEqual([]);
        expect(engine.loads).toEqual([]);
    });

    it("reports a failed job with its reason, and takes another after it", async () => {
        const {engine, dispatch, events, model} = await setup(
            (e) => (e.failWith = new Error("The model wrote nothing on the calibration prompts"))
        );
        await dispatch("models:calibrate", {id: model.id});
        await until(() => events.at(-1)?.state !== "running");
        expect(events.at(-1)).toMatchObject({
            state: "failed",
            message: "The calibration failed: The model wrote nothing on the calibration prompts"
        });
        engine.failWith = null;
        expect(await dispatch("models:calibrate", {id: model.id})).toMatchObject({ok: true});
    });
});

describe("a calibration in the engine process", () => {
    it("streams its progress from the engine process and cancels it there", async () => {
        const {children, spawn} = memoryEngines((engine) => {
            engine.calibrationStepMs = 30;
            // a step within a prompt (no estimate) 30 ms after the first is not sent
            engine.calibrationSteps.splice(1, 0, {...engine.calibrationSteps[0]!, done: 0.5});
        });
        const proxy = new EngineProxy({spawn});
        await proxy.loadModel("/m.gguf", null);
        const progress: string[] = [];
        const done = await proxy.calibrateRetention({
            modelPath: "/m.gguf",
            promptSet: "english",
            workDir,
            signal: new AbortController().signal,
            onProgress: (p) => progress.push(`${p.stage} ${p.done}/${p.total}`)
        });
        expect(done).toMatchObject({installed: true, prompts: 2});
        // a stage's steps 250 ms apart at most, but each new estimate of the time left goes at once
        expect(progress).toEqual(["thinking 0/2", "thinking 1/2", "training 4/8", "validating 1/4"]);
        expect(children[0]!.engine.calibrations[0]).toMatchObject({modelPath: "/m.gguf", promptSet: "english", workDir});

        const abort = new AbortController();
        const cancelled = proxy.calibrateRetention({modelPath: "/m.gguf", promptSet: "english", workDir, signal: abort.signal});
        await until(() => children[0]!.engine.calibrations.length === 2);
        abort.abort();
        expect(await cancelled).toBeNull();
        expect(children[0]!.engine.calibrations[1]!.signal.aborted).toBe(true);
        await proxy.dispose();
    });
});
