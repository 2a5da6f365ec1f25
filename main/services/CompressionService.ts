import os from "node:os";
import type {BudgetEstimate, CompressionSettings, EngineStatus} from "../../preload/contract.js";
import {policyEntry, policyIds, policyName} from "../../preload/policyCatalogue.js";
import {AppError} from "../AppError.js";
import {compressionSupport} from "../kv/compressionSupport.js";
import type {EngineApi, ModelInspection} from "../engine/EngineApi.js";
import {hasRpcDevices} from "../engine/rpc/rpcEndpoint.js";
import {findRetentionGates} from "../engine/retention/findRetentionGates.js";
import {requireRetentionGates} from "../engine/retention/requireRetentionGates.js";
import type {RetentionAvailability} from "../engine/retention/types.js";
import {policyNeeds, scoring} from "../engine/policies/scoring.js";
import {minBudgetCells} from "../kv/budgetCap.js";
import {kvCellPadding, type FitOptions} from "../kv/contextFit.js";
import {cacheTypeProblem, formatMib} from "../kv/kvMemory.js";
import {resolveKv, type ResolvedKv, type ResolveOptions} from "../kv/resolveKv.js";
import type {ModelService} from "./ModelService.js";

/** What a compression setting means for a model: cells, bytes, whether it fits, from the GGUF's own metadata. */
export class CompressionService {
    constructor(
        private readonly _engine: EngineApi,
        private readonly _models: ModelService
    ) {}

    async estimate(compression: CompressionSettings, modelId?: string): Promise<BudgetEstimate> {
        const model = modelId != null ? await this._models.inspection(modelId) : this._engine.inspection;
        if (model == null) throw new AppError("MODEL_NOT_LOADED", "Load a model (or name one) to estimate a budget");
        const modelLoaded = modelId == null || this._engine.status.model?.id === modelId;
        const retention = await findRetentionGates(model);
        // A GPU build, or rpc-servers' devices: the loaded model as it was loaded, another one with its own setting.
        const {freeMemoryBytes, placement} = await this._room(modelId != null && !modelLoaded ? modelId : null);
        return estimateBudget(model, compression, freeMemoryBytes, {modelLoaded, retention, ...placement});
    }

    /**
     * The loaded model's KV settings for a generation, resolved once (`resolveKv`) with what the estimate reads: the free
     * memory (the machine's, or on a GPU build or with rpc-servers' devices the engine's), the GPU layers it was loaded
     * with, the policy's side state. TRIM-KV without gates trained for the model is refused with the reason
     * (`POLICY_UNAVAILABLE`), never run as another policy.
     */
    async resolve(compression: CompressionSettings): Promise<ResolvedKv> {
        const model = this._engine.inspection;
        if (model == null) throw new AppError("MODEL_NOT_LOADED", "Load a model (or name one) to estimate a budget");
        const retention = policyNeeds(compression).retention === true ? await requireRetentionGates(model) : undefined;
        const {freeMemoryBytes, placement} = await this._room(null);
        return resolveKv(model, compression, freeMemoryBytes, {gpu: placement.gpu, sideState: sideState(compression, retention)});
    }

    /**
     * The free memory a fit reads, and on a build that offloads where the layers go: the loaded model's GPU layers, or
     * those of `otherModelId` (a model not loaded) as set.
     */
    private async _room(
        otherModelId: string | null
    ): Promise<{freeMemoryBytes: number; placement: Pick<EstimateOptions, "gpu" | "offloadTo">}> {
        const build = this._engine.status.build;
        if (!offloads(build)) return {freeMemoryBytes: os.freemem(), placement: {}};
        const gpuLayers = otherModelId != null ? this._models.get(otherModelId).gpuLayers : this._engine.status.model?.gpuLayers;
        return {
            freeMemoryBytes: await this._engine.freeMemory(),
            placement: {
                gpu: {gpuLayers: gpuLayers ?? "auto", freeRamBytes: os.freemem()},
                offloadTo: build.gpu === false ? "rpc-servers" : "gpu"
            }
        };
    }
}

/**
 * What the compression's policy keeps beside the cache: its scored rows, the gates' weights (when it reads them and they
 * are there), its value norms.
 */
function sideState(
    compression: CompressionSettings,
    retention: RetentionAvailability | undefined
): NonNullable<ResolveOptions["sideState"]> {
    const needs = policyNeeds(compression);
    const retentionWeightBytes = needs.retention === true && retention?.available === true ? retention.info.weightBytes : null;
    return {scoreRows: scoring(compression).rows, retentionWeightBytes, valueNorms: needs.valueNorms === true};
}

/** Whether a build places layers elsewhere than the CPU: a GPU build, or a CPU build with rpc-servers' devices. */
function offloads(build: EngineStatus["build"]): build is NonNullable<EngineStatus["build"]> {
    return build != null && (build.gpu !== false || hasRpcDevices(build.rpc));
}

export type EstimateOptions = FitOptions & {
    /** The model's retention gates (`findRetentionGates`): what TRIM-KV loads, or why it cannot run. Defaults to unknown. */
    retention?: RetentionAvailability;
    /** Where offloaded layers go: the GPU (the default), or the RPC servers (a CPU build with rpc-servers). */
    offloadTo?: keyof typeof offloadPlaces;
};

/** The offload's place and its memory, in words. */
const offloadPlaces = {
    gpu: {target: "the GPU", memory: "VRAM"},
    "rpc-servers": {target: "the RPC servers", memory: "their memory"}
};

/**
 * Pure: the budget's cells and bytes for this model, and whether the weights (unless `modelLoaded`), the KV cache and
 * the compute buffer fit in `freeMemoryBytes`; on a GPU build, each part in the VRAM or RAM its GPU layers put it in.
 * A budget above the model's context (`budgetCap`) is capped to it, and says so in `aboveCap`.
 */
export function estimateBudget(
    model: ModelInspection,
    compression: CompressionSettings,
    freeMemoryBytes: number,
    options: EstimateOptions = {}
): BudgetEstimate {
    const {cells, bytesPerCell, maxCells, aboveCap, cappedByMemory, fit, fits} = resolveKv(model, compression, freeMemoryBytes, {
        ...options,
        sideState: sideState(compression, options.retention)
    });
    const notes: string[] = [];
    const contextLength = model.contextLength;
    if (cappedByMemory && contextLength != null)
        notes.push(
            `Capped at half the free memory: the model's ${contextLength}-token context would need ${formatMib(contextLength * bytesPerCell)}.`
        );
    if (aboveCap != null) notes.push(`${aboveCap.message} Until it is changed, ${maxCells.toLocaleString("en-US")} cells are used.`);
    if (cells < minBudgetCells) notes.push(`${cells} cells is below the smallest usable budget of ${minBudgetCells} cells.`);

    const cacheProblem = cacheTypeProblem(model, compression);
    if (cacheProblem != null) notes.push(cacheProblem);

    const support = compressionSupport(model.architecture);
    const entry = policyEntry(compression.policy);
    if (!support.supported && !entry.keepsEveryToken) notes.push(support.note!);
    const retention = options.retention;
    // Without valid gates for the model, the policies that read them cannot run on it.
    const unavailablePolicies =
        retention?.available === false
            ? policyIds.filter((id) => policyEntry(id).reads.gates).map((policy) => ({policy, reason: retention.reason}))
            : [];
    const needs = policyNeeds(compression);
    const readsRetention = needs.retention === true;
    if (readsRetention && retention?.available === false)
        notes.push(`${policyName(compression.policy)} cannot run on this model: ${retention.reason}.`);
    if (entry.keepsEveryToken) notes.push(`${entry.name} keeps every token: the answer stops when ${cells} cells are used.`);
    else
        notes.push(
            `${policyName(compression.policy)} prunes while the model thinks, so a chain of thought longer than ${cells} tokens fits.`
        );

    if (fit.allocatedCells !== cells)
        notes.push(`llama.cpp reserves cells in steps of ${kvCellPadding}: ${fit.allocatedCells} cells are allocated, ${cells} are used.`);
    const offload = fit.offload != null ? {...fit.offload, ...offloadPlaces[options.offloadTo ?? "gpu"]} : fit.offload;
    if (offload != null && offload.gpuLayers < offload.totalLayers)
        notes.push(
            offload.gpuLayers === 0
                ? `No layer is on ${offload.target}: the weights and the KV cache are in RAM.`
                : `${offload.gpuLayers} of ${offload.totalLayers} layers are on ${offload.target}; the others' weights and KV cache are in RAM.`
        );
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
        trainedBudget:
            retention?.available === true && retention.info.budget != null
                ? {cells: retention.info.budget, source: retention.info.source}
                : null,
        modelLoaded: options.modelLoaded ?? true,
        neededBytes: fit.neededBytes,
        offload,
        fits,
        compressionSupported: support.supported,
        notes
    };
}
