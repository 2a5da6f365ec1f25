import type {CalibrationValidation} from "../../../preload/contract.js";
/** What a valid retention gate file (`<model>.retention.gguf`) says about its gates. */
export type RetentionInfo = {
    /** `ponder.retention.version`: the sidecar format. */
    version: number;
    /** `ponder.retention.gate`: the gate's shape (`"trimkv-rg"`: TRIM-KV's retention gate). */
    gate: string;
    /** `ponder.retention.activation`: between the gate's two layers (`"silu"`). */
    activation: string;
    /** Architecture, layers, model width and KV heads of the model the gates belong to (checked against the model's own). */
    modelArchitecture: string;
    layers: number;
    embeddingLength: number;
    headCountKv: number;
    /** `ponder.retention.hidden`: the width of the gate's hidden layer. */
    hidden: number;
    /** `ponder.retention.budget`: the cell budget M the gates were trained at; `null` when unknown (0 in the file). */
    budget: number | null;
    /**
     * `ponder.retention.reduction`: how training reduced the heads' retention on shared cells: `"shared"`, the max over
     * layers and heads per cell (the engine's aggregate mode); `"per-head"`, each (layer, KV head) on its own.
     */
    reduction: "shared" | "per-head";
    /** `ponder.retention.source`: where the gates came from, in words (a training run, a converted checkpoint). */
    source: string;
    /** Bytes of the gate tensors as stored. */
    weightBytes: number;
    /** `ponder.retention.calibration.*`: how Ponder's calibration made the gates; `null` for gates made otherwise. */
    calibration?: RetentionCalibration | null;
};

/** The provenance a calibration writes into the gates it installs (main/engine/calibration/calibrateRetention.ts). */
export type RetentionCalibration = {
    /** `"english"` (Ponder's prompts) or `"demo"` (the demo task's training problems). */
    promptSet: string;
    /** Prompts the model thought through. */
    prompts: number;
    /** Tokens it wrote (prompts included). */
    tokens: number;
    /** Tokens the gates were fitted on. */
    samples: number;
    /** Seconds the calibration took. */
    seconds: number;
    /** When it finished (ISO 8601). */
    date: string;
    /** The calibration texts' lengths in tokens, and how many a limit cut; `null` in gates that did not record them. */
    texts: {mean: number; longest: number; cut: number} | null;
    /** Top-1 agreement with Full on held-out prompts, per share of the cells, the gates' and Lethe's. */
    validation: CalibrationValidation | null;
};

/** Whether a model has gates the engine can load: the sidecar's path and what it holds, or why not, in plain words. */
export type RetentionAvailability = {available: true; path: string; info: RetentionInfo} | {available: false; reason: string};
