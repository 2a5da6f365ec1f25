import type {GateTrainingData, TrainGatesOptions} from "./types.js";

/** The options with their defaults, and the data's shape, checked. */
export type TrainSettings = {
    layers: number;
    width: number;
    hidden: number;
    kvHeads: number;
    epochs: number;
    batch: number;
    learningRate: number;
    weightDecay: number;
    initStd: number;
    minSeen: number;
};

export function trainSettings(data: GateTrainingData, options: TrainGatesOptions): TrainSettings {
    const hidden = options.hidden ?? 64;
    const epochs = options.epochs ?? 12;
    const batch = options.batch ?? 128;
    const learningRate = options.learningRate ?? 3e-3;
    const {layers, embeddingLength: width, headCountKv: kvHeads, tokens: count} = data;
    if (
        data.features.length !== count * layers * width ||
        data.horizons.length !== count * layers * kvHeads ||
        data.followers.length !== count
    )
        throw new RangeError("The calibration data's arrays do not match its layers, width, KV heads and token count");
    if (!(hidden >= 1 && epochs >= 1 && batch >= 1 && learningRate > 0))
        throw new RangeError("hidden, epochs and batch must be at least 1, the learning rate above 0");
    const weightDecay = options.weightDecay ?? 1e-4;
    const initStd = options.initStd ?? 0.02;
    const minSeen = options.minSeen ?? data.minWatched ?? 16;
    return {layers, width, hidden, kvHeads, epochs, batch, learningRate, weightDecay, initStd, minSeen};
}
