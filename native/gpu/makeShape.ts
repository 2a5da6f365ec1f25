// Makes the CUDA check's 1.5B shape (native/gpu/README.md, "The 1.5B shape"): the fixture generator's bench-1.5b-shape
// (DeepSeek-R1-Distill-Qwen-1.5B's 28 layers, 12 query and 2 KV heads, width 384, random F16 weights: 86 MB), quantized
// to Q4_0 by the harness built for the CPU (llama_model_quantize) so that it fits the archive, and random retention gates
// for it (TRIM-KV's mechanism, not its choices), into native/.build/gpu/.
//
//   npx tsx native/gpu/makeShape.ts [--harness FILE]
//
// --harness  the harness built by `bash native/gpu/run.sh --cpu --stage build`. Defaults to
//            `native/.build/gpu-work/build-cpu/bin/ponder-gpu-harness`.
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import {fileURLToPath} from "node:url";
import {getFixtureModel} from "../../test/fixtures/gguf/fixtures.js";
import {writeRetentionSidecar} from "../../test/fixtures/gguf/retentionSidecar.js";

const nativeDir = path.join(path.dirname(fileURLToPath(import.meta.url)), "..");
const outDir = path.join(nativeDir, ".build", "gpu");
const harnessIndex = process.argv.indexOf("--harness");
// where CMake put it: bin/ or the build folder itself, as run.sh looks
const built = ["bin", "."].map((folder) => path.join(nativeDir, ".build", "gpu-work", "build-cpu", folder, "ponder-gpu-harness"));
const harness = harnessIndex > 0 ? path.resolve(process.argv[harnessIndex + 1]!) : (built.find((file) => fs.existsSync(file)) ?? built[0]!);
if (!fs.existsSync(harness)) throw new Error(`no harness at ${harness}: build it with bash native/gpu/run.sh --cpu --stage build`);

const source = await getFixtureModel("bench-1.5b-shape");
fs.mkdirSync(outDir, {recursive: true});
const model = path.join(outDir, "bench-1.5b-shape.q4_0.gguf");
const quantized = spawnSync(harness, ["--quantize", source, model, "q4_0"], {stdio: "inherit"});
if (quantized.status !== 0) throw new Error(`quantizing ${source} failed (exit ${quantized.status})`);
await writeRetentionSidecar(model.replace(/\.gguf$/, ".retention.gguf"), {
    modelPath: model,
    architecture: "qwen2",
    layers: 28,
    width: 384,
    kvHeads: 2,
    hidden: 32,
    seed: 6,
    weightType: "f16"
});
console.log(`${path.relative(process.cwd(), model)}: ${(fs.statSync(model).size / 1024 / 1024).toFixed(1)} MiB, with its retention gates`);
