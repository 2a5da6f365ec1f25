/** A TRIM-KV checkpoint the authors released on Hugging Face (`ngocbh/trimkv`, README table), and its base model's shape. */
export type TrimkvRelease = {
    /** The Hugging Face repository holding `config.json` and `trimkv_weights.pth`. */
    repo: string;
    /** The model the gates were trained on (config.json's `base_model`). */
    baseModel: string;
    /** config.json's `memory_size`: the cell budget the gates were trained at. */
    memorySize: number;
    /** The base model's shape as its GGUF declares it: `general.architecture`, `block_count`, `embedding_length`, heads, KV heads. */
    architecture: string;
    layers: number;
    embeddingLength: number;
    headCount: number;
    headCountKv: number;
    /** Words that the GGUF's name (or file name), lower-cased with `-`, `_` and `.` as spaces, holds when it is this base model. */
    nameHints: string[];
    /** Words whose presence says it is another model of the same shape. Defaults to none. */
    nameExcludes?: string[];
};

/** The files each release holds, as Hugging Face serves them at `<endpoint>/<repo>/resolve/main/<file>`. */
export const trimkvReleaseFiles = {config: "config.json", weights: "trimkv_weights.pth"} as const;

/**
 * The TRIM-KV gates the authors released (the "rg" gates; their DBTrimKV set is another method and is not offered), with
 * the public shapes of the models they were trained on (each model's config.json: num_hidden_layers, hidden_size,
 * num_attention_heads, num_key_value_heads).
 */
export const trimkvReleases: readonly TrimkvRelease[] = [
    {
        repo: "ngocbh/TrimKV-Qwen3-1.7B-Math",
        baseModel: "Qwen/Qwen3-1.7B",
        memorySize: 512,
        architecture: "qwen3",
        layers: 28,
        embeddingLength: 2048,
        headCount: 16,
        headCountKv: 8,
        nameHints: ["qwen3", "1 7b"]
    },
    {
        repo: "ngocbh/TrimKV-Qwen3-4B-Math",
        baseModel: "Qwen/Qwen3-4B",
        memorySize: 512,
        architecture: "qwen3",
        layers: 36,
        embeddingLength: 2560,
        headCount: 32,
        headCountKv: 8,
        nameHints: ["qwen3", "4b"],
        nameExcludes: ["2507"]
    },
    {
        repo: "ngocbh/TrimKV-Qwen3-8B-Math",
        baseModel: "Qwen/Qwen3-8B",
        memorySize: 512,
        architecture: "qwen3",
        layers: 36,
        embeddingLength: 4096,
        headCount: 32,
        headCountKv: 8,
        nameHints: ["qwen3", "8b"]
    },
    {
        repo: "ngocbh/TrimKV-Qwen3-14B-Math",
        baseModel: "Qwen/Qwen3-14B",
        memorySize: 512,
        architecture: "qwen3",
        layers: 40,
        embeddingLength: 5120,
        headCount: 40,
        headCountKv: 8,
        nameHints: ["qwen3", "14b"]
    },
    {
        repo: "ngocbh/TrimKV-Qwen3-4B-Instruct-2507",
        baseModel: "Qwen/Qwen3-4B-Instruct-2507",
        memorySize: 4096,
        architecture: "qwen3",
        layers: 36,
        embeddingLength: 2560,
        headCount: 32,
        headCountKv: 8,
        nameHints: ["qwen3", "4b", "instruct", "2507"]
    },
    {
        repo: "ngocbh/TrimKV-Phi-3-mini-128k-instruct",
        baseModel: "microsoft/Phi-3-mini-128k-instruct",
        memorySize: 2048,
        architecture: "phi3",
        layers: 32,
        embeddingLength: 3072,
        headCount: 32,
        headCountKv: 32,
        nameHints: ["phi 3", "mini", "128k"]
    },
    {
        repo: "ngocbh/TrimKV-DeepSeek-R1-Distill-Llama-8B",
        baseModel: "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
        memorySize: 512,
        architecture: "llama",
        layers: 32,
        embeddingLength: 4096,
        headCount: 32,
        headCountKv: 8,
        nameHints: ["deepseek", "r1", "distill", "llama", "8b"]
    }
];
