import type {KvSample} from "../../preload/contract/compression.js";
import type {BuildInfo, EngineStatus, ReadReason} from "../../preload/contract/engine.js";
import type {ErrorInfo} from "../../preload/contract/errors.js";
import type {ModelInfo} from "../../preload/contract/models.js";
import type {
    LoadOptions,
    CalibrateRequest,
    CalibrationJobProgress,
    CountTokensRequest,
    GenerateRequest,
    GenerationChunk,
    GenerationResult,
    ModelInspection,
    PromptTokenCount,
    StateSave
} from "./EngineApi.js";

/**
 * The messages between the main process and the engine process (`EngineProxy` and `serveEngine`), in the
 * style of `preload/contract.ts`: each call carries an id, and its answer, events and abort name it. Messages are
 * structured clones (Electron's `utilityProcess` ports, Node's `fork` with advanced serialisation).
 */
export type EngineCalls = {
    start: {args: []; res: BuildInfo};
    freeMemory: {args: []; res: number};
    inspect: {args: [modelPath: string]; res: ModelInspection};
    loadModel: {args: [modelPath: string, modelInfo: ModelInfo | null, options?: LoadOptions]; res: ModelInspection};
    countTokens: {args: [request: CountTokensRequest]; res: PromptTokenCount | null};
    saveState: {args: [path?: string]; res: StateSave | null};
    dispose: {args: []; res: void};
};
export type EngineMethod = keyof EngineCalls;

/** A generation request without its callbacks and signal: those stay in the main process. */
export type WireGenerateRequest = Omit<GenerateRequest, "signal" | "onChunk" | "onSample" | "onRebuild"> & {
    samples: boolean;
    rebuild: boolean;
};

/** A calibration request without its signal and progress callback: those stay in the main process. */
export type WireCalibrateRequest = Omit<CalibrateRequest, "signal" | "onProgress">;

/** Faults the engine process injects into itself for the fault-injection tests, honoured only when started with them allowed. */
export type EngineFault = "abort" | "exit" | "abortOnLoad";

export type ToEngine =
    | {[M in EngineMethod]: {type: "call"; id: number; method: M; args: EngineCalls[M]["args"]}}[EngineMethod]
    | {type: "generate"; id: number; request: WireGenerateRequest}
    | {type: "calibrate"; id: number; request: WireCalibrateRequest}
    | {type: "abort"; id: number}
    | {type: "fault"; fault: EngineFault};

export type FromEngine =
    | {type: "ready"; pid: number}
    | {type: "status"; status: EngineStatus; inspection: ModelInspection | null}
    | {type: "result"; id: number; ok: true; value: unknown}
    | {type: "result"; id: number; ok: false; error: ErrorInfo}
    | {type: "chunks"; id: number; chunks: GenerationChunk[]}
    | {type: "sample"; id: number; sample: KvSample}
    | {type: "rebuild"; id: number; progress: number; reason: ReadReason}
    | {type: "calibration"; id: number; progress: CalibrationJobProgress}
    | {type: "stateSettled"; save: StateSave};

export type GenerateAnswer = GenerationResult;

/** One end of the channel: how the engine process (or the main process) sends and hears. */
export type Channel<Out, In> = {
    post(message: Out): void;
    onMessage(listener: (message: In) => void): void;
};
