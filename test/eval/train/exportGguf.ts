// Writes a trained reasoner as a GGUF (the "llama", "qwen2" or "qwen3" architecture) from the raw tensors that export.py dumps.
// Reuses the GGUF writer, the byte-level tokenizer table and the ChatML + <think> chat template of the test
// fixtures, so the embedded model and the fixture models share one tokenizer/template definition.
//
// Usage (normally run by export.py): npx tsx test/eval/train/exportGguf.ts <dump.json> <out.gguf> [f32|f16]
//
// The dump is a JSON header {config, tensors: [{name, shape, offset}]} next to a .bin file of little-endian
// float32 data; `shape` is the PyTorch shape (outermost first), which is reversed into ggml's innermost-first dims.

import {readFile} from "node:fs/promises";
import {GgmlType, gguf, writeGguf, type GgufTensor, type GgufValue} from "../../fixtures/gguf/writeGguf.js";
import {bytesToUnicode, SPECIAL_TOKENS, tokenizerMetadata, TokenType} from "../../fixtures/gguf/tokenizer.js";

type Dump = {
    config: {
        vocab_size: number;
        n_embd: number;
        n_layer: number;
        n_head: number;
        n_ff: number;
        rope_freq_base: number;
        rms_eps: number;
        context_length: number;
        /** "llama", "qwen2" or "qwen3" (absent in older dumps: llama). */
        arch?: string;
        n_head_kv: number;
        n_embd_head: number;
    };
    name: string;
    description: string;
    /** Merge rules "a b" in rank order; each adds the token a+b after the 256 byte tokens. */
    merges: string[];
    specialTokens: string[];
    tensors: Array<{name: string; shape: number[]; offset: number}>;
};

/**
 * Byte-level BPE vocabulary: ids 0..255 are the GPT-2 byte symbols in byte order, then one token per merge (the
 * merges only join ASCII letters, whose GPT-2 symbols are the letters themselves), then the special tokens.
 */
function demoVocabulary(merges: readonly string[], specialTokens: readonly string[]) {
    const tokens = [...bytesToUnicode()];
    for (const merge of merges) {
        if (!/^[A-Za-z] [A-Za-z]$/.test(merge)) throw new Error(`unexpected merge ${JSON.stringify(merge)}`);
        tokens.push(merge.replace(" ", ""));
    }
    const tokenTypes: number[] = tokens.map(() => TokenType.NORMAL);
    if (JSON.stringify(specialTokens) !== JSON.stringify(SPECIAL_TOKENS.map((s) => s.text)))
        throw new Error("special tokens differ from test/fixtures/gguf/tokenizer.ts");
    for (const special of SPECIAL_TOKENS) {
        tokens.push(special.text);
        tokenTypes.push(special.type);
    }
    const idOf = (text: string) => tokens.lastIndexOf(text);
    return {tokens, tokenTypes, idOf};
}

async function main() {
    const [dumpPath, outPath, typeArg = "f32"] = process.argv.slice(2);
    if (dumpPath == null || outPath == null) throw new Error("usage: exportGguf.ts <dump.json> <out.gguf> [f32|f16]");
    const dump = JSON.parse(await readFile(dumpPath, "utf8")) as Dump;
    const raw = await readFile(dumpPath.replace(/\.json$/, ".bin"));
    const data = new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength));
    const c = dump.config;
    const vocab = demoVocabulary(dump.merges, dump.specialTokens);
    if (vocab.tokens.length !== c.vocab_size) throw new Error(`vocabulary has ${vocab.tokens.length} tokens, the model ${c.vocab_size}`);
    const matrixType = typeArg === "f16" ? GgmlType.F16 : GgmlType.F32;

    const tensors: GgufTensor[] = dump.tensors.map((t) => {
        const count = t.shape.reduce((a, b) => a * b, 1);
        const values = data.subarray(t.offset / 4, t.offset / 4 + count);
        return {
            name: t.name,
            dims: [...t.shape].reverse(),
            type: t.shape.length >= 2 ? matrixType : GgmlType.F32,
            data: values
        };
    });

    const endOfText = vocab.idOf("<|endoftext|>");
    const imEnd = vocab.idOf("<|im_end|>");
    const a = c.arch ?? "llama";
    if (a !== "llama" && a !== "qwen2" && a !== "qwen3") throw new Error(`unsupported architecture ${a}`);
    // qwen3 states the head dimension (it need not be n_embd / n_head); llama's and qwen2's is n_embd / n_head (qwen2's
    // biases on q, k and v are tensors of their own, attn_q.bias and the like, and need no key).
    if (a !== "qwen3" && c.n_embd_head * c.n_head !== c.n_embd) throw new Error(`${a} needs n_embd = n_head * head dimension`);
    const headDims: Array<[string, GgufValue]> =
        a === "qwen3"
            ? [
                  [`${a}.attention.key_length`, gguf.u32(c.n_embd_head)],
                  [`${a}.attention.value_length`, gguf.u32(c.n_embd_head)]
              ]
            : [];
    const metadata: Array<[string, GgufValue]> = [
        ["general.architecture", gguf.string(a)],
        ["general.type", gguf.string("model")],
        ["general.name", gguf.string(dump.name)],
        ["general.description", gguf.string(dump.description)],
        ["general.license", gguf.string("MIT")],
        ["general.file_type", gguf.u32(matrixType === GgmlType.F16 ? 1 : 0)],
        ["general.alignment", gguf.u32(32)],
        [`${a}.context_length`, gguf.u32(c.context_length)],
        [`${a}.embedding_length`, gguf.u32(c.n_embd)],
        [`${a}.block_count`, gguf.u32(c.n_layer)],
        [`${a}.feed_forward_length`, gguf.u32(c.n_ff)],
        [`${a}.attention.head_count`, gguf.u32(c.n_head)],
        [`${a}.attention.head_count_kv`, gguf.u32(c.n_head_kv)],
        ...headDims,
        [`${a}.attention.layer_norm_rms_epsilon`, gguf.f32(c.rms_eps)],
        [`${a}.rope.freq_base`, gguf.f32(c.rope_freq_base)],
        [`${a}.rope.dimension_count`, gguf.u32(c.n_embd_head)],
        [`${a}.vocab_size`, gguf.u32(vocab.tokens.length)],
        ...tokenizerMetadata({tokens: vocab.tokens, tokenTypes: vocab.tokenTypes, merges: dump.merges}, "llama-bpe", {endOfText, imEnd})
    ];
    const size = await writeGguf(outPath, {metadata, tensors});
    console.log(JSON.stringify({out: outPath, bytes: size, tensors: tensors.length, type: typeArg}));
}

await main();
