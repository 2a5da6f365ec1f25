import os from "node:os";
import type {BudgetEstimate, CompressionSettings, EngineStatus} from "../../preload/contract.js";
import {policyName} from "../../preload/policyCatalogue.js";
import {AppError} from "../AppError.js";
import {compressionSupport} from "../engine/compressionSupport.js";
import type {EngineApi} from "../engine/EngineApi.js";
import {minBudgetCells} from "../engine/budgetCap.js";
import {contextFit, kvCellPadding, type FitOptions} from "../engine/contextFit.js";
import {cacheTypeProblem, formatMib} from "../engine/kvMemory.js";
import {hasRpcDevices} from "../engine/rpc/rpcEndpoint.js";
import {findRetentionGates} from "../engine/retention/findRetentionGates.js";
import type {RetentionAvailability} from "../engine/retention/types.js";
import {policyNeeds, scoring} from "../engine/scoring.js";
import type {ModelInspection} from "../engine/types.js";
import {resolveKv, type ResolvedKv} from "../kv/resolveKv.js";
import type {ModelService} from "./ModelService.js";

/** What a compression setting means for a model: cells, bytes, whether it fits, from the GGUF's own metadata. */
export class CompressionService {
    constructor(private readonly _engine: EngineApi, private readonly _models: ModelService) {}

    async estimate(compression: CompressionSettings, modelId?: string): Promise<BudgetEstimate> {
        const model = modelId != null ? await this._models.inspection(modelId) : this._engine.inspection;
        if (model == null)
            throw new AppError("MODEL_NOT_LOADED", "Load a model (or name one) to estimate a budget");
        const modelLoaded = modelId == null || this._engine.status.model?.id === modelId;
        const retention = await findRetentionGates(model);
        const build = this._engine.status.build;
        if (!offloads(build))
            return estimateBudget(model, compression, os.freemem(), {modelLoaded, retention});
        // A GPU build, or rpc-servers' devices: the loaded model as it was loaded, another one with its own setting.
        const gpuLayers = modelId != null && !modelLoaded ? this._models.get(modelId).gpuLayers : this._engine.status.model?.gpuLayers;
        return estimateBudget(model, compression, await this._engine.freeMemory(),
            {modelLoaded, retention, gpu: {gpuLayers: gpuLayers ?? "auto", freeRamBytes: os.freemem()}, offloadTo: build.gpu === false ? "rpc-servers" : "gpu"});
    }

    /**
     * The loaded model's KV settings for a generation, resolved once (`resolveKv`), with the free memory the estimate
     * reads: the machine's, or on a GPU build (or with rpc-servers' devices) the engine's.
     */
    async resolve(compression: CompressionSettings): Promise<ResolvedKv> {
        const model = this._engine.inspection;
        if (model == null)
            throw new AppError("MODEL_NOT_LOADED", "Load a model (or name one) to estimate a budget");
        return resolveKv(model, compression, offloads(this._engine.status.build) ? await this._engine.freeMemory() : os.freemem());
    }
}

/** Whether a build places layers elsewhere than the CPU: a GPU build, or a CPU build with rpc-servers' devices. */
function offloads(build: EngineStatus["build"]): build is NonNullable<EngineStatus["build"]> {
    return build != null && (build.gpu !== false || hasRpcDevices(build.rpc));
}

export type EstimateOptions = FitOptions & {
    /** The model's retention gates (`findRetentionGates`): what TRIM-KV loads, or why it cannot run. Defaults to unknown. */
    retention?: RetentionAvailability,
    /** Where offloaded layers go: the GPU (the default), or the RPC servers (a CPU build with rpc-servers). */
    offloadTo?: keyof typeof offloadPlaces
};

/** The offload's place and its memory, in words. */
const offloadPlaces = {
    "gpu": {target: "the GPU", memory: "VRAM"},
    "rpc-servers": {target: "the RPC servers", memory: "their memory"}
};

/**
 * Pure: the budget's cells and bytes for this model, and whether the weights (unless `modelLoaded`), the KV cache and
 * the compute buffer fit in `freeMemoryBytes`; on a GPU build, each part in the VRAM or RAM its GPU layers put it in.
 * A budget above the model's context (`budgetCap`) is capped to it, and says so in `aboveCap`.
 */
export function estimateBudget(model: ModelInspection, compression: CompressionSettings, freeMemoryBytes: number,
    options: EstimateOptions = {}): BudgetEstimate {
    const {cells, bytesPerCell, maxCells, aboveCap, cappedByMemory} = resolveKv(model, compression, freeMemoryBytes);
    const notes: string[] = [];
    const contextLength = model.contextLength;
    if (cappedByMemory && contextLength != null)
        notes.push(`Capped at half the free memory: the model's ${contextLength}-token context would need ${formatMib(contextLength * bytesPerCell)}.`);
    if (aboveCap != null)
        notes.push(`${aboveCap.message} Until it is changed, ${maxCells.toLocaleString("en-US")} cells are used.`);
    if (cells < minBudgetCells)
        notes.push(`${cells} cells is below the smallest usable budget of ${minBudgetCells} cells.`);

    const cacheProblem = cacheTypeProblem(model, compression);
    if (cacheProblem != null)
        notes.push(cacheProblem);

    const support = compressionSupport(model.architecture);
    if (!support.supported && compression.policy !== "full")
        notes.push(support.note!);
    const retention = options.retention;
    const unavailablePolicies = retention?.available === false ? [{policy: "trimkv" as const, reason: retention.reason}] : [];
    const needs = policyNeeds(compression);
    const readsRetention = needs.retention === true;
    if (readsRetention && retention?.available === false)
        notes.push(`${policyName(compression.policy)} cannot run on this model: ${retention.reason}.`);
    if (compression.policy === "full")
        notes.push(`Full KV keeps every token: the answer stops when ${cells} cells are used.`);
    else
        notes.push(`${policyName(compression.policy)} prunes while the model thinks, so a chain of thought longer than ${cells} tokens fits.`);

    const {kvType, kvTypeV, flashAttention} = compression;
    const retentionWeightBytes = readsRetention && retention?.available === true ? retention.info.weightBytes : null;
    const shape = {cells, kvType, kvTypeV, flashAttention, scoreRows: scoring(compression).rows, retentionWeightBytes, valueNorms: needs.valueNorms === true};
    const fit = contextFit(model, shape, freeMemoryBytes, options)!;
    if (fit.allocatedCells !== cells)
        notes.push(`llama.cpp reserves cells in steps of ${kvCellPadding}: ${fit.allocatedCells} cells are allocated, ${cells} are used.`);
    const offload = fit.offload != null ? {...fit.offload, ...offloadPlaces[options.offloadTo ?? "gpu"]} : fit.offload;
    if (offload != null && offload.gpuLayers < offload.totalLayers)
        notes.push(offload.gpuLayers === 0
            ? `No layer is on ${offload.target}: the weights and the KV cache are in RAM.`
            : `${offload.gpuLayers} of ${offload.totalLayers} layers are on ${offload.target}; the others' weights and KV cache are in RAM.`);
    return {
        cells,
        allocatedCells: fit.allocatedCells,
        bytesPerCell,
        bytes: fit.bytes,
        fullContextBytes: contextLength != null ? contextLength * bytesPerCell : null,
        modelContextLength: contextLength,
        maxCells,
        aboveCap,
        freeMemoryBytes,
        weightsBytes: model.weightsBytes ?? null,
        computeBytes: fit.computeBytes,
        scoresBytes: fit.scoresBytes,
        retentionBytes: fit.retentionBytes,
        valueNormBytes: fit.valueNormBytes,
        unavailablePolicies,
        modelLoaded: options.modelLoaded ?? true,
        neededBytes: fit.neededBytes,
        offload,
        fits: fit.fits && cells >= minBudgetCells,
        compressionSupported: support.supported,
        notes
    };
}
