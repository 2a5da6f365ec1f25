import {CheckpointError} from "./CheckpointError.js";
import type {GateModelShape} from "./gateLayersFromStateDict.js";

/** What a TRIM-KV checkpoint's `config.json` tells the conversion. */
export type TrimkvConfig = {
    /** `memory_size`: the cell budget M the gates were trained at; `null` when the config does not say. */
    memorySize: number | null;
    /** `retention_gate_intermediate_size`: the gate's hidden width, when the config says. */
    hidden: number | null;
    /** `base_model` (or `_name_or_path`): the model the gates were trained on, when the config says. */
    baseModel: string | null;
};

/**
 * Checks a TRIM-KV checkpoint's `config.json` (the parsed JSON) for gates Ponder runs: `retention_gate` must be `"rg"`
 * (the gate on the layer's attention input; `"rg2"` has the same key names and, for Qwen3-1.7B, the same shapes, but
 * reads each head's keys and values after RoPE, which the engine's gate does not see), `hidden_act` must be `silu`,
 * and the model's layers, width and KV heads, where the config states them, must be this model's. Throws CheckpointError.
 */
export function checkTrimkvConfig(config: unknown, model: GateModelShape): TrimkvConfig {
    if (config == null || typeof config !== "object" || Array.isArray(config))
        throw new CheckpointError("config.json is not a JSON object");
    const fields = config as Record<string, unknown>;
    const gate = fields.retention_gate;
    if (gate === "rg2")
        throw new CheckpointError(
            'config.json says retention_gate "rg2": these gates read each head\'s keys and values after RoPE, ' +
                "not the layer's attention input that Ponder's gates read; they cannot be converted (only \"rg\" gates can)"
        );
    if (gate !== "rg")
        throw new CheckpointError(
            `config.json says retention_gate ${gate === undefined ? "nothing" : JSON.stringify(gate)}; ` +
                'only the "rg" gate (linear1, SiLU, linear2, per-head bias on the attention input) can be converted'
        );
    if (fields.hidden_act !== "silu")
        throw new CheckpointError(`config.json says hidden_act ${JSON.stringify(fields.hidden_act ?? null)}; the gate runs SiLU only`);
    const stated = [
        ["num_hidden_layers", "layers", model.layers],
        ["hidden_size", "width", model.width],
        ["num_key_value_heads", "KV heads", model.kvHeads]
    ] as const;
    for (const [key, what, own] of stated) {
        const value = fields[key];
        if (value !== undefined && value !== own)
            throw new CheckpointError(`config.json is for a model with ${JSON.stringify(value)} ${what} (${key}); this model has ${own}`);
    }
    const memorySize = fields.memory_size;
    if (
        memorySize !== undefined &&
        (typeof memorySize !== "number" || !Number.isInteger(memorySize) || memorySize <= 0 || memorySize > 0xffffffff)
    )
        throw new CheckpointError(`config.json's memory_size ${JSON.stringify(memorySize)} is not a number of cells`);
    const hidden = fields.retention_gate_intermediate_size;
    if (hidden !== undefined && (typeof hidden !== "number" || !Number.isInteger(hidden) || hidden <= 0))
        throw new CheckpointError(`config.json's retention_gate_intermediate_size ${JSON.stringify(hidden)} is not a width`);
    const base = fields.base_model ?? fields._name_or_path;
    return {
        memorySize: memorySize ?? null,
        hidden: hidden ?? null,
        baseModel: typeof base === "string" && base !== "" ? base : null
    };
}
