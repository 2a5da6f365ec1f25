import type {OffloadEstimate} from "../../preload/contract/compression.js";
import type {GpuLayers} from "../../preload/contract/models.js";
import type {ModelInspection} from "../engine/EngineApi.js";

/** Where the layers go, in bytes; the caller names the place (`OffloadEstimate.target` and `memory`). */
export type OffloadFit = Omit<OffloadEstimate, "target" | "memory">;

export type OffloadInput = {
    gpuLayers: GpuLayers;
    /** Bytes of the KV cache and of the compute buffer for the budget. */
    kvBytes: number;
    computeBytes: number;
    /** The weights are loaded already: they take no more memory. */
    modelLoaded: boolean;
    freeVramBytes: number;
    freeRamBytes: number;
};

/**
 * Pure: how a model splits between VRAM and RAM with its GPU layers setting, as llama.cpp places it. The input layer
 * (token embeddings) stays in RAM; each offloaded repeating layer takes its weights and its KV to the GPU; the output
 * layer goes last, once every repeating layer is there (node-llama-cpp counts it: `totalLayers` = layers + 1). The
 * compute buffer is taken to sit on the GPU once any layer is offloaded. `"auto"` is estimated as the most layers that
 * fit in free VRAM (node-llama-cpp's own fit also weighs the context it will create).
 */
export function gpuOffload(
    model: Pick<ModelInspection, "layers" | "weightsBytes" | "layerWeightsBytes" | "outputWeightsBytes" | "tiedOutputBytes" | "sizeBytes">,
    input: OffloadInput
): OffloadFit {
    const layers = Math.max(1, model.layers ?? 1);
    const totalLayers = layers + 1;
    const weights = model.weightsBytes ?? model.sizeBytes;
    // Older inspections lack the split: spread the weights over the layers evenly.
    const layerWeights = model.layerWeightsBytes ?? (weights * layers) / totalLayers;
    const outputWeights = model.outputWeightsBytes ?? weights / totalLayers;
    const split = (gpuLayers: number) => {
        const repeating = Math.min(gpuLayers, layers) / layers;
        const outputOnGpu = gpuLayers > layers;
        // Tied embeddings are copied to the output layer: the token embeddings stay in RAM for the input layer.
        const gpuWeights = layerWeights * repeating + (outputOnGpu ? outputWeights + (model.tiedOutputBytes ?? 0) : 0);
        const ramWeights = weights - layerWeights * repeating - (outputOnGpu ? outputWeights : 0);
        const kvGpu = input.kvBytes * repeating;
        const weightsNeeded = (bytes: number) => (input.modelLoaded ? 0 : bytes);
        return {
            gpuLayers,
            totalLayers,
            vramBytes: Math.round(weightsNeeded(gpuWeights) + kvGpu + (gpuLayers > 0 ? input.computeBytes : 0)),
            ramBytes: Math.round(weightsNeeded(Math.max(0, ramWeights)) + input.kvBytes - kvGpu + (gpuLayers > 0 ? 0 : input.computeBytes)),
            freeVramBytes: input.freeVramBytes,
            freeRamBytes: input.freeRamBytes
        };
    };
    if (input.gpuLayers === "max") return split(totalLayers);
    if (typeof input.gpuLayers === "number") return split(Math.max(0, Math.min(totalLayers, input.gpuLayers)));
    for (let gpuLayers = totalLayers; gpuLayers > 0; gpuLayers--) {
        const estimate = split(gpuLayers);
        if (estimate.vramBytes <= input.freeVramBytes) return estimate;
    }
    return split(0);
}
