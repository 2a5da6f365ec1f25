/** Architectures on llama.cpp's standard attention path (no sliding window, no latent attention, not recurrent). */
const supported = new Set([
    "llama",
    "qwen2",
    "qwen2moe",
    "qwen3",
    "qwen3moe",
    "mistral",
    "mistral3",
    "granite",
    "granitemoe",
    "internlm2",
    "olmo",
    "olmo2",
    "stablelm",
    "starcoder2",
    "phi3",
    "deci",
    "exaone",
    "smollm3"
]);
const reasons: Record<string, string> = {
    gemma2: "sliding-window attention",
    gemma3: "sliding-window attention",
    gemma3n: "sliding-window attention",
    "gpt-oss": "sliding-window attention",
    deepseek2: "latent attention (MLA)",
    mamba: "a recurrent model",
    mamba2: "a recurrent model",
    rwkv6: "a recurrent model",
    rwkv7: "a recurrent model",
    jamba: "a hybrid recurrent model",
    granitehybrid: "a hybrid recurrent model",
    nemotron_h: "a hybrid recurrent model",
    qwen3next: "a hybrid recurrent model"
};

/** Whether KV pruning supports this architecture; when not, why (the model still chats with Full KV). */
export function compressionSupport(architecture: string | null): {supported: boolean; note: string | null} {
    if (architecture != null && supported.has(architecture)) return {supported: true, note: null};
    const reason =
        architecture == null
            ? "an unknown architecture"
            : (reasons[architecture] ?? `the ${architecture} architecture, not verified with pruning`);
    return {supported: false, note: `KV compression is off for ${reason}; this model runs with Full KV.`};
}
