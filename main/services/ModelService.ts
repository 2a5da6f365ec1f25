import {randomUUID} from "node:crypto";
import type {
    ConvertedTrimkvGates,
    EngineStatus,
    GenerationCapabilities,
    GpuLayers,
    ModelDetails,
    ModelInfo
} from "../../preload/contract.js";
import {compressionSupport} from "../kv/compressionSupport.js";
import {headLength, kvBytesPerCell} from "../kv/kvMemory.js";
import {findRetentionGates} from "../engine/retention/findRetentionGates.js";
import {matchTrimkvReleases} from "../engine/retention/matchTrimkvReleases.js";
import {CheckpointError} from "../engine/retention/trimkvCheckpoint/CheckpointError.js";
import {convertTrimkvCheckpoint} from "../engine/retention/trimkvCheckpoint/convertTrimkvCheckpoint.js";
import type {ModelInspection, EngineApi} from "../engine/EngineApi.js";
import {AppError} from "../AppError.js";
import type {AppDatabase} from "../db/AppDatabase.js";
import {toModelInfo} from "./dto.js";
import {recommendedSampling} from "./recommendedSampling.js";
import type {SettingsService} from "./SettingsService.js";
import type {Clock} from "./types.js";

export class ModelService {
    constructor(
        private readonly _db: AppDatabase,
        private readonly _engine: EngineApi,
        private readonly _settings: SettingsService,
        private readonly _now: Clock
    ) {}

    list(): ModelInfo[] {
        return this._db.models.list().map(toModelInfo);
    }

    /** Validates a local GGUF file and remembers it; adding the same path again refreshes it. */
    async add(path: string): Promise<ModelInfo> {
        const inspection = await this._engine.inspect(path);
        const existing = this._db.models.getByPath(inspection.path);
        this._db.models.upsert({
            id: existing?.id ?? randomUUID(),
            path: inspection.path,
            name: inspection.name,
            size_bytes: inspection.sizeBytes,
            architecture: inspection.architecture,
            context_length: inspection.contextLength,
            metadata: JSON.stringify(inspection),
            added_at: existing?.added_at ?? this._now(),
            last_used_at: existing?.last_used_at ?? null
        });
        return toModelInfo(this._db.models.getByPath(inspection.path)!);
    }

    get(id: string): ModelInfo {
        return toModelInfo(this._require(id));
    }

    /**
     * Sets the GPU layers the model loads with, from its next load: `auto`, `max`, or a count up to its layers plus
     * the output layer.
     */
    setGpuLayers(id: string, gpuLayers: GpuLayers): ModelInfo {
        const row = this._require(id);
        const layers = (JSON.parse(row.metadata) as Partial<ModelInspection>).layers;
        if (typeof gpuLayers === "number" && layers != null && gpuLayers > layers + 1)
            throw new AppError(
                "BAD_REQUEST",
                `${row.name} has ${layers} layers and an output layer: at most ${layers + 1} can go to the GPU`
            );
        this._db.models.setGpuLayers(id, String(gpuLayers));
        return this.get(id);
    }

    /** The model's shape and what its KV cache costs, read from the GGUF header. */
    async details(id: string): Promise<Omit<ModelDetails, "fit">> {
        const row = this._require(id);
        const inspection = await this._engine.inspect(row.path).catch((): ModelInspection | null => null);
        const stored = inspection ?? (JSON.parse(row.metadata) as Partial<ModelInspection>);
        const shape = {
            layers: stored.layers ?? null,
            headCount: stored.headCount ?? null,
            headCountKv: stored.headCountKv ?? null,
            embeddingLength: stored.embeddingLength ?? null
        };
        const support = compressionSupport(row.architecture);
        const heads = {...shape, keyLength: stored.keyLength ?? null, valueLength: stored.valueLength ?? null};
        return {
            ...toModelInfo(row),
            ...shape,
            keyLength: headLength(shape, heads.keyLength),
            kvBytesPerToken: kvBytesPerCell(heads),
            weightsBytes: stored.weightsBytes ?? null,
            parameterCount: stored.parameterCount ?? null,
            quantization: stored.weightType ?? null,
            compressionSupported: support.supported,
            compressionNote: inspection == null ? `The file is missing or damaged now: ${row.path}` : support.note,
            retention:
                inspection == null
                    ? {available: false, reason: "the model file is missing or damaged"}
                    : retentionOf(await findRetentionGates(inspection)),
            trimkvReleases: trimkvReleasesOf({...shape, architecture: row.architecture, name: row.name, path: row.path})
        };
    }

    /** Whether the loaded model can think on and off, and the sampling its publisher recommends. */
    capabilities(): GenerationCapabilities | null {
        const inspection = this._engine.inspection;
        if (inspection == null) return null;
        return {thinkingToggle: inspection.thinkingToggle === true, recommended: recommendedSampling(inspection)};
    }

    inspectionOf(id: string): ModelInspection {
        return JSON.parse(this._require(id).metadata) as ModelInspection;
    }

    /**
     * The stored inspection, read again from the file when it was stored by a version that did not record the
     * weights (in all and per layer), head sizes and vocabulary (the estimate needs them); a file gone since keeps the stored one.
     */
    async inspection(id: string): Promise<ModelInspection> {
        const stored = this.inspectionOf(id);
        if (stored.weightsBytes != null && stored.vocabularySize !== undefined && stored.layerWeightsBytes != null) return stored;
        const row = this._require(id);
        const fresh = await this._engine.inspect(row.path).catch(() => null);
        if (fresh == null) return stored;
        this._db.models.upsert({...row, metadata: JSON.stringify(fresh)});
        return fresh;
    }

    /**
     * Converts the TRIM-KV authors' released gates (`trimkv_weights.pth`, and its `config.json` when given) into the
     * model's retention sidecar beside it, where TRIM-KV finds them from its next conversation on (convertTrimkvCheckpoint:
     * nothing in the checkpoint is executed). A checkpoint or config that is not the "rg" gates for this model is refused
     * in words (BAD_REQUEST), and any earlier sidecar stays as it was.
     */
    async convertTrimkv(id: string, weights: string, config?: string): Promise<ConvertedTrimkvGates> {
        const row = this._require(id);
        try {
            const written = await convertTrimkvCheckpoint({weights, config, modelPath: row.path});
            return {
                hidden: written.hidden,
                layers: written.layers,
                budget: written.budget,
                baseModel: written.baseModel,
                source: written.source
            };
        } catch (err) {
            if (err instanceof CheckpointError)
                throw new AppError("BAD_REQUEST", `The TRIM-KV gates could not be converted: ${err.message}`, {cause: err});
            throw err;
        }
    }

    remove(id: string): void {
        if (this._engine.status.model?.id === id) throw new AppError("BUSY", "This model is loaded: load another model before removing it");
        if (!this._db.models.delete(id)) throw new AppError("NOT_FOUND", `Model ${id} is not known`);
        if (this._settings.get().defaultModelId === id) this._settings.update({defaultModelId: null});
    }

    /** Loading the model stopped the engine: it is marked, and start-up does not load it by itself again. */
    markCrashed(id: string): void {
        if (this._db.models.get(id) == null) return;
        this._db.models.markCrashed(id, this._now());
        if (this._settings.get().defaultModelId === id) this._settings.update({defaultModelId: null});
    }

    async load(id: string): Promise<EngineStatus> {
        const row = this._require(id);

        const info = toModelInfo(row);
        await this._engine.loadModel(row.path, info, {gpuLayers: info.gpuLayers ?? "auto"});
        this._db.models.markUsed(id, this._now());
        this._settings.update({defaultModelId: id});
        return this._engine.status;
    }

    private _require(id: string) {
        const row = this._db.models.get(id);
        if (row == null) throw new AppError("NOT_FOUND", `Model ${id} is not known`);
        return row;
    }
}

/** The authors' released gates for a model of this shape, as the model's details offer them. */
function trimkvReleasesOf(model: Parameters<typeof matchTrimkvReleases>[0]): NonNullable<ModelDetails["trimkvReleases"]> {
    const match = matchTrimkvReleases(model);
    return {releases: match.releases.map(({repo, baseModel, memorySize}) => ({repo, baseModel, memorySize})), why: match.why};
}

/** Whether TRIM-KV can run, as the model's details show it, with the calibration that made the gates when one did. */
function retentionOf(found: Awaited<ReturnType<typeof findRetentionGates>>): NonNullable<ModelDetails["retention"]> {
    return found.available
        ? {available: true, reason: null, calibration: found.info.calibration ?? null}
        : {available: false, reason: found.reason};
}
