import {describe, expect, test} from "vitest";
import type {CalibrationStatus} from "../../../preload/contract.js";
import {calibrationFraction, describeCalibrationProgress, describeCalibrationResult} from "../../../renderer/lib/describeCalibration.js";
import {createModels} from "../../../renderer/state/models.svelte.js";
import {createFakeBridge} from "./fakeBridge.js";

const running = (overrides: Partial<CalibrationStatus> = {}): CalibrationStatus => ({
    modelId: "m1",
    state: "running",
    stage: "thinking",
    step: 2,
    of: 8,
    etaSeconds: 250,
    message: "Thinking 3/8",
    resumed: 0,
    result: null,
    ...overrides
});
const provenance = {
    promptSet: "english",
    prompts: 38,
    tokens: 51_200,
    samples: 40_000,
    seconds: 540,
    date: "2026-11-27T02:00:00.000Z",
    validation: {
        prompts: 4,
        tokens: 2000,
        points: [
            {share: 0.25, gates: 0.97, lethe: 0.86, answers: {gates: 0.9, lethe: 0.4}},
            {share: 0.5, gates: 0.99, lethe: 0.95, answers: null}
        ]
    }
};

describe("calibration state", () => {
    test("starts a calibration, follows its progress events, and on install reads the details again and offers TRIM-KV", async () => {
        const bridge = createFakeBridge();
        const installed: string[] = [];
        bridge.reply("models:calibrate", running({stage: "starting", step: 0, of: 1, etaSeconds: null, message: "Starting"}));
        bridge.reply("models:details", {retention: {available: true, reason: null, calibration: provenance}} as never);
        const models = createModels(bridge.api, {onGatesInstalled: (id) => installed.push(id)});
        expect(await models.calibrate("m1")).toBe(true);
        expect(bridge.calls.at(-1)).toEqual({channel: "models:calibrate", payload: {id: "m1"}});
        expect(models.state.calibration).toMatchObject({state: "running", stage: "starting"});

        bridge.emit(
            "models:calibration",
            running({stage: "questions", step: 12, of: 40, etaSeconds: null, message: "Writing its own questions 12/40"})
        );
        expect(describeCalibrationProgress(models.state.calibration!)).toBe("Writing its own questions 12/40 · estimating the time left");
        expect(calibrationFraction(models.state.calibration!)).toBe(0);
        bridge.emit("models:calibration", running());
        expect(describeCalibrationProgress(models.state.calibration!)).toBe("Thinking 3/8 · about 4 min left");
        expect(calibrationFraction(models.state.calibration!)).toBeCloseTo(2 / 8 / 3);
        bridge.emit(
            "models:calibration",
            running({stage: "validating", step: 1, of: 4, etaSeconds: 40, message: "Validating against Lethe 1/4", resumed: 5})
        );
        expect(describeCalibrationProgress(models.state.calibration!)).toBe(
            "Validating against Lethe 1/4 · about 40 s left · went on from 5 prompts thought before"
        );
        expect(calibrationFraction(models.state.calibration!)).toBeCloseTo((2 + 1 / 4) / 3);
        expect(installed).toEqual([]);

        bridge.emit(
            "models:calibration",
            running({
                state: "installed",
                stage: "writing",
                step: 1,
                of: 1,
                etaSeconds: 0,
                message: "installed",
                result: {...provenance, installed: true}
            })
        );
        await new Promise((resolve) => setTimeout(resolve, 0));
        expect(bridge.calls.at(-1)).toEqual({channel: "models:details", payload: {id: "m1"}});
        expect(models.state.details.m1?.retention?.calibration).toEqual(provenance);
        expect(installed).toEqual(["m1"]);
        expect(describeCalibrationResult(models.state.details.m1!.retention!.calibration!)).toBe(
            "Calibrated on 38 thoughts (on Ponder's English prompts), 51,200 tokens, 9 min; held-out agreement at 25%: 0.97, Lethe 0.86 (answers 0.90, Lethe 0.40); at 50%: 0.99, Lethe 0.95"
        );
        // read from conversations, with the texts' lengths and the ones a limit cut
        expect(
            describeCalibrationResult({
                ...provenance,
                promptSet: "conversations",
                validation: null,
                texts: {mean: 1104, longest: 4096, cut: 2}
            })
        ).toBe(
            "Calibrated on 38 thoughts (read from your conversations with it), 51,200 tokens, texts of 1,104 tokens on average (longest 4,096; 2 cut at the limit), 9 min"
        );
    });

    test("a refused start is said for its model; cancel asks the backend; a refusal by the validation offers nothing", async () => {
        const bridge = createFakeBridge();
        const installed: string[] = [];
        bridge.fail("models:calibrate", "BUSY", "A calibration of tiny is already running: cancel it or wait for it to end");
        bridge.reply("models:calibrateCancel", undefined);
        bridge.reply("models:details", {retention: {available: false, reason: "no gates"}} as never);
        const models = createModels(bridge.api, {onGatesInstalled: (id) => installed.push(id)});
        expect(await models.calibrate("m2")).toBe(false);
        expect(models.state.calibrationError).toEqual({
            id: "m2",
            text: "Could not calibrate: A calibration of tiny is already running: cancel it or wait for it to end"
        });
        await models.cancelCalibration();
        expect(bridge.calls.at(-1)).toEqual({channel: "models:calibrateCancel", payload: undefined});

        bridge.emit("models:calibration", running({state: "refused", message: "not installed", result: {...provenance, installed: false}}));
        await new Promise((resolve) => setTimeout(resolve, 0));
        expect(models.state.calibration?.state).toBe("refused");
        expect(installed).toEqual([]);
        models.dispose();
        expect(bridge.listenerCount("models:calibration")).toBe(0);
    });
});
