import type {RetentionGateLayer} from "../gateLayer.js";
import {CheckpointError} from "./CheckpointError.js";
import type {TorchTensor} from "./readTorchStateDict.js";

/** The shape the gates must have been trained for: the model's layers, width and KV heads. */
export type GateModelShape = {layers: number; width: number; kvHeads: number};

const keyPattern = /^(?:.*\.)?layers\.(\d+)\.self_attn\.retention_gate\.(.+)$/;
const rgParts = ["linear1.weight", "linear1.bias", "linear2.weight", "bias"] as const;

/**
 * Maps the TRIM-KV authors' "rg" state_dict onto one retention gate per layer, after the checks of
 * scripts/retention/convertTrimkv.py, in its order and words: every key is a layer's
 * `self_attn.retention_gate.{linear1.weight, linear1.bias, linear2.weight, bias}`; another gate type (`gate_proj` /
 * `up_proj`: "rg3"; a linear2 bias) or any other parameter is refused; there is one gate per layer of the model, each of
 * shape linear1 [H, d], [H], linear2 [n_kv, H], bias [n_kv]. Throws CheckpointError with the reason.
 */
export function gateLayersFromStateDict(tensors: ReadonlyMap<string, TorchTensor>, model: GateModelShape): RetentionGateLayer[] {
    const perLayer = new Map<number, Map<string, TorchTensor>>();
    for (const [key, tensor] of tensors) {
        const match = keyPattern.exec(key);
        if (match == null)
            throw new CheckpointError(`unexpected key ${JSON.stringify(key)}: only the retention gates' weights are expected`);
        const layer = Number(match[1]);
        let parts = perLayer.get(layer);
        if (parts == null) perLayer.set(layer, (parts = new Map()));
        parts.set(match[2]!, tensor);
    }
    const parts = new Set([...perLayer.values()].flatMap((layer) => [...layer.keys()]));
    if ([...parts].some((part) => part.includes("gate_proj") || part.includes("up_proj") || part === "down_proj.weight"))
        throw new CheckpointError(
            "this checkpoint uses the gate_proj/up_proj retention gate ('rg3'), which is not supported " +
                "(only 'rg': linear1, SiLU, linear2, bias)"
        );
    if (parts.has("linear2.bias"))
        throw new CheckpointError("linear2 has a bias: not the 'rg' gate (linear2 without bias + per-head bias); not supported");
    const extra = [...parts].filter((part) => !(rgParts as readonly string[]).includes(part)).sort();
    if (extra.length > 0)
        throw new CheckpointError(`unsupported gate parameters ${JSON.stringify(extra)} (only ${rgParts.join(", ")} are supported)`);
    const layers = [...perLayer.keys()].sort((a, b) => a - b);
    if (layers.length !== model.layers || layers.some((layer, i) => layer !== i))
        throw new CheckpointError(
            `the checkpoint has gates for layers [${layers.slice(0, 3).join(", ")}]...[${layers.slice(-3).join(", ")}] ` +
                `(${layers.length} layers); the model has ${model.layers} layers`
        );

    const first = perLayer.get(0)?.get("linear1.weight");
    const hidden = first != null && first.shape.length === 2 ? first.shape[0]! : null;
    return layers.map((i) => {
        const src = perLayer.get(i)!;
        const missing = rgParts.filter((part) => !src.has(part));
        if (missing.length > 0)
            throw new CheckpointError(
                `layer ${i}: missing ${missing.map((part) => `model.layers.${i}.self_attn.retention_gate.${part}`).join(", ")}`
            );
        const expected: Record<(typeof rgParts)[number], (number | null)[]> = {
            "linear1.weight": [hidden, model.width],
            "linear1.bias": [hidden],
            "linear2.weight": [model.kvHeads, hidden],
            bias: [model.kvHeads]
        };
        for (const part of rgParts) {
            const shape = src.get(part)!.shape;
            const want = expected[part];
            if (hidden == null || shape.length !== want.length || shape.some((n, k) => n !== want[k]))
                throw new CheckpointError(
                    `layer ${i}: retention_gate.${part} has shape [${shape.join(", ")}], expected [${want.join(", ")}] ` +
                        `(model: d ${model.width}, ${model.kvHeads} KV heads; gate hidden ${hidden})`
                );
        }
        return {
            fc1: src.get("linear1.weight")!.data,
            fc1Bias: src.get("linear1.bias")!.data,
            fc2: src.get("linear2.weight")!.data,
            bias: src.get("bias")!.data
        };
    });
}
