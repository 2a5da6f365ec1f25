// Converts the TRIM-KV authors' released gate weights (`trimkv_weights.pth`, with its `config.json`) into a Ponder retention
// sidecar, in TypeScript: the checkpoint's pickle is read by a reader that executes nothing (no PyTorch needed).
//
//     npm run convert:trimkv -- --weights trimkv_weights.pth [--config config.json] --model model.gguf [--out model.retention.gguf] [--type f16]
//
// --config checks the gate type (`retention_gate` "rg"; "rg2" is refused), `hidden_act` silu and the model's shape, and
// records `memory_size` as the gates' trained budget (without it the budget is 0, unknown). --out defaults to
// <model>.retention.gguf beside the model, where the app looks; --type (f32 or f16, the two weight matrices) defaults to
// f16 for models wider than 1024, else f32. scripts/retention/convertTrimkv.py is the reference it is tested against.
import {parseArgs} from "node:util";
import {CheckpointError} from "../../main/engine/retention/trimkvCheckpoint/CheckpointError.js";
import {convertTrimkvCheckpoint} from "../../main/engine/retention/trimkvCheckpoint/convertTrimkvCheckpoint.js";

const usage =
    "usage: npm run convert:trimkv -- --weights trimkv_weights.pth [--config config.json] --model model.gguf [--out sidecar.gguf] [--type f32|f16]";

function fail(message: string): never {
    console.error(`error: ${message}`);
    process.exit(1);
}

let args;
try {
    args = parseArgs({
        options: {
            weights: {type: "string"},
            config: {type: "string"},
            model: {type: "string"},
            out: {type: "string"},
            type: {type: "string"},
            help: {type: "boolean", short: "h"}
        },
        strict: true
    }).values;
} catch (err) {
    fail(`${(err as Error).message}\n${usage}`);
}
if (args.help) {
    console.log(usage);
    process.exit(0);
}
if (args.weights == null || args.model == null) fail(`--weights and --model are required\n${usage}`);
if (args.type != null && args.type !== "f32" && args.type !== "f16") fail(`--type must be f32 or f16, not ${args.type}`);

try {
    const written = await convertTrimkvCheckpoint({
        weights: args.weights,
        config: args.config,
        modelPath: args.model,
        out: args.out,
        type: args.type as "f32" | "f16" | undefined
    });
    console.log(
        `wrote ${written.path}: ${written.layers} layers, d ${written.embeddingLength}, hidden ${written.hidden}, ` +
            `${written.headCountKv} KV heads; trained budget ${written.budget ?? "unknown"}`
    );
} catch (err) {
    fail(err instanceof CheckpointError ? err.message : String((err as Error).stack ?? err));
}
