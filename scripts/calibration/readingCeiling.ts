// How much faster reading can be than writing on this machine, whatever a calibration records: the same tokens
// evaluated by node-llama-cpp's stock binary (and by Ponder's patched build, with nothing captured), once in chunks
// of --chunk tokens (prompt speed: what reading costs at best) and once a token per evaluation (decoding: what writing
// costs at least), Full KV, in one run. Prints seconds per 1,000 tokens of each and their ratio, per build:
//
//   npx tsx scripts/calibration/readingCeiling.ts --model <file.gguf> [--tokens 768] [--chunk 128] [--threads 2]
import path from "node:path";
import {parseArgs} from "node:util";
import {getLlama, type Llama, type Token} from "node-llama-cpp";
import {loadPatchedLlama} from "../../main/engine/native/loadPatchedLlama.js";

const {values} = parseArgs({
    options: {
        model: {type: "string"},
        tokens: {type: "string", default: "768"},
        chunk: {type: "string", default: "128"},
        threads: {type: "string", default: "2"}
    }
});
if (values.model == null) {
    console.error("error: --model <file.gguf> is required");
    process.exit(1);
}
const count = Number(values.tokens);
const chunk = Number(values.chunk);
const threads = Number(values.threads);
if (![count, chunk, threads].every((n) => Number.isInteger(n) && n > 0)) {
    console.error("error: --tokens, --chunk and --threads take whole numbers above 0");
    process.exit(1);
}

/** A text of `count` ordinary tokens: English words, the same for every build and way. */
function textTokens(tokenize: (text: string) => Token[]): Token[] {
    const words = "the model reads every line it wrote before and adds the numbers one by one until the answer is known ";
    const tokens: Token[] = [];
    while (tokens.length < count) tokens.push(...tokenize(words));
    return tokens.slice(0, count);
}

/** Seconds to evaluate `count` tokens in pieces of `piece` tokens from an empty cache. */
async function evaluate(llama: Llama, piece: number): Promise<number> {
    const model = await llama.loadModel({modelPath: path.resolve(values.model!)});
    const tokens = textTokens((text) => model.tokenize(text));
    const context = await model.createContext({contextSize: count + 64, batchSize: chunk, flashAttention: false, threads, sequences: 1});
    const sequence = context.getSequence();
    try {
        const t0 = performance.now();
        for (let at = 0; at < tokens.length; at += piece) await sequence.evaluateWithoutGeneratingNewTokens(tokens.slice(at, at + piece));
        return (performance.now() - t0) / 1000;
    } finally {
        await context.dispose();
        await model.dispose();
    }
}

const builds: Array<[string, () => Promise<Llama>]> = [
    ["stock", () => getLlama({gpu: false, build: "never", usePrebuiltBinaries: true, logLevel: "error" as never})],
    ["patched", () => loadPatchedLlama({gpu: false, logLevel: "error"})]
];
for (const [name, load] of builds) {
    const llama = await load();
    try {
        await evaluate(llama, chunk); // warm-up: the first evaluation of a process pays for setting up
        const read = await evaluate(llama, chunk);
        const write = await evaluate(llama, 1);
        console.log(
            JSON.stringify({
                build: name,
                model: path.basename(values.model),
                tokens: count,
                chunk,
                readSecondsPer1000: +((read / count) * 1000).toFixed(3),
                writeSecondsPer1000: +((write / count) * 1000).toFixed(3),
                readingFaster: +(write / read).toFixed(1),
                threads
            })
        );
    } finally {
        await llama.dispose();
    }
}
