// The TRIM-KV authors' released gates converted in TypeScript (convert:trimkv, convertTrimkvCheckpoint): checkpoints
// written by torch.save with the authors' key names, in F32 and BF16, become the same sidecar bytes as
// scripts/retention/convertTrimkv.py writes; config.json is checked ("rg" only, "rg2" refused) and its memory_size kept;
// every bad file (a missing layer, a truncated or damaged zip, hostile sizes, a pickle that would run a command) is
// refused with the reason and nothing is written or run. Needs Python with torch (Debian's python3-torch).
import {execFileSync, spawnSync} from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {afterAll, beforeAll, describe, expect, test} from "vitest";
import {AppDatabase} from "../../main/db/AppDatabase.js";
import {createDispatch} from "../../main/ipc/dispatch.js";
import {createHandlers} from "../../main/ipc/handlers.js";
import {findRetentionGates} from "../../main/engine/retention/findRetentionGates.js";
import {convertTrimkvCheckpoint} from "../../main/engine/retention/trimkvCheckpoint/convertTrimkvCheckpoint.js";
import {readTorchStateDict} from "../../main/engine/retention/trimkvCheckpoint/readTorchStateDict.js";
import {AppServices} from "../../main/services/AppServices.js";
import {getFixtureModelInfo} from "../fixtures/gguf/fixtures.js";
import type {GeneratedModelInfo} from "../fixtures/gguf/generateModel.js";
import {torchPython} from "../fixtures/torchPython.js";
import {FakeEngine} from "../unit/main/FakeEngine.js";

const root = path.resolve(import.meta.dirname, "../..");
const gatePrefix = "model.layers.1.self_attn.retention_gate.";

describe("TRIM-KV checkpoints converted in TypeScript", () => {
    let dir: string;
    let python: string;
    let modelPath: string;
    let info: GeneratedModelInfo;
    let values: Record<string, {shape: number[]; values: number[]}>;
    const file = (name: string) => path.join(dir, name);

    /** Runs the fixture writer on these jobs; returns its output lines as JSON. */
    const torchJobs = (jobs: object[]): unknown[] =>
        execFileSync(python, [path.join(root, "test/fixtures/torchCheckpoints.py"), JSON.stringify(jobs)], {
            encoding: "utf8",
            timeout: 240_000
        })
            .split("\n")
            .filter((line) => line !== "")
            .map((line) => JSON.parse(line) as unknown);
    const pythonConvert = (args: string[]) =>
        spawnSync(python, [path.join(root, "scripts/retention/convertTrimkv.py"), ...args], {encoding: "utf8", timeout: 120_000});
    const refusal = (promise: Promise<unknown>) =>
        promise.then(
            () => "converted",
            (err: Error) => err.message
        );

    beforeAll(async () => {
        python = torchPython();
        dir = await fs.mkdtemp(path.join(os.tmpdir(), "ponder-trimkv-ts-"));
        info = await getFixtureModelInfo("tiny-qwen3");
        modelPath = file("tiny-qwen3.gguf");
        await fs.copyFile(info.path, modelPath);
        const trimkv = {job: "trimkv", model: modelPath, hidden: 48};
        const tensor = {name: "w", type: "FloatStorage", key: "0", numel: 6, offset: 0, size: [2, 3], stride: [3, 1]};
        [values] = torchJobs([
            {...trimkv, out: file("f32.pth"), seed: 1, dtype: "f32"},
            {...trimkv, out: file("bf16.pth"), seed: 2, dtype: "bf16"},
            {...trimkv, out: file("wrapped.pth"), seed: 3, dtype: "f32", wrap: true},
            {...trimkv, out: file("no-layer-3.pth"), seed: 4, dtype: "f32", drop_layer: 3},
            {...trimkv, out: file("no-linear2.pth"), seed: 5, dtype: "bf16", drop_key: `${gatePrefix}linear2.weight`},
            {job: "evil", out: file("evil.pth"), marker: file("evil-ran")},
            {job: "crafted", out: file("past-storage.pth"), tensors: [{...tensor, offset: 1}], storages: {0: 24}},
            {
                job: "crafted",
                out: file("short-storage.pth"),
                tensors: [{...tensor, numel: 600, size: [20, 30], stride: [30, 1]}],
                storages: {0: 24}
            },
            {job: "crafted", out: file("huge-stride.pth"), tensors: [{...tensor, stride: [2 ** 40, 1]}], storages: {0: 24}},
            {job: "crafted", out: file("huge-numel.pth"), tensors: [{...tensor, numel: 2 ** 40}], storages: {0: 24}},
            {job: "values", out: file("values.pth")}
        ]) as [Record<string, {shape: number[]; values: number[]}>];
        const configs: Record<string, object> = {
            rg: {
                retention_gate: "rg",
                hidden_act: "silu",
                memory_size: 512,
                retention_gate_intermediate_size: 48,
                num_hidden_layers: 4,
                hidden_size: 160,
                num_key_value_heads: 2,
                base_model: "Qwen/Qwen3-1.7B"
            },
            rg2: {retention_gate: "rg2", hidden_act: "silu", memory_size: 512},
            rg3: {retention_gate: "rg3", hidden_act: "silu", memory_size: 512},
            gelu: {retention_gate: "rg", hidden_act: "gelu", memory_size: 512},
            "other-model": {retention_gate: "rg", hidden_act: "silu", memory_size: 512, num_hidden_layers: 28},
            "other-hidden": {retention_gate: "rg", hidden_act: "silu", memory_size: 512, retention_gate_intermediate_size: 512},
            "bad-budget": {retention_gate: "rg", hidden_act: "silu", memory_size: -3}
        };
        for (const [name, config] of Object.entries(configs)) await fs.writeFile(file(`${name}.json`), JSON.stringify(config));
    }, 300_000);

    afterAll(async () => {
        await fs.rm(dir, {recursive: true, force: true});
    });

    test("tensors read as torch reads them: F32, BF16, F16, a transposed view, an offset view, a Parameter", async () => {
        const tensors = await readTorchStateDict(file("values.pth"));
        expect([...tensors.keys()]).toEqual(Object.keys(values));
        for (const [name, expected] of Object.entries(values)) {
            const tensor = tensors.get(name)!;
            expect(tensor.shape, name).toEqual(expected.shape);
            expect(Array.from(tensor.data), name).toEqual(expected.values.map((v) => Math.fround(v)));
        }
        expect(tensors.get("bf16")!.dtype).toBe("BF16");
        expect(tensors.get("f16")!.dtype).toBe("F16");
    });

    test("F32 and BF16 checkpoints with the authors' key names give convertTrimkv.py's sidecar byte for byte, F32 and F16", async () => {
        for (const weights of ["f32.pth", "bf16.pth", "wrapped.pth"]) {
            for (const type of ["f32", "f16"] as const) {
                const reference = file(`py-${weights}-${type}.gguf`);
                const result = pythonConvert(["--weights", file(weights), "--model", modelPath, "--out", reference, "--type", type]);
                expect(result.status, result.stderr).toBe(0);
                const ours = file(`ts-${weights}-${type}.gguf`);
                const written = await convertTrimkvCheckpoint({weights: file(weights), modelPath, out: ours, type});
                expect(written).toMatchObject({
                    path: ours,
                    layers: 4,
                    embeddingLength: 160,
                    headCountKv: 2,
                    hidden: 48,
                    budget: null,
                    matrixType: type,
                    source: `converted from ${weights}`
                });
                expect(Buffer.compare(await fs.readFile(ours), await fs.readFile(reference)), `${weights} as ${type}`).toBe(0);
            }
        }
    }, 300_000);

    test("npm run convert:trimkv: the TypeScript tool writes the sidecar beside the model with config.json's budget, and the app accepts it", async () => {
        const result = spawnSync(
            "npx",
            ["tsx", "scripts/retention/convertTrimkv.ts", "--weights", file("bf16.pth"), "--config", file("rg.json"), "--model", modelPath],
            {cwd: root, encoding: "utf8", timeout: 120_000}
        );
        expect(result.status, result.stderr).toBe(0);
        expect(result.stdout).toMatch(/wrote .*tiny-qwen3\.retention\.gguf: 4 layers, d 160, hidden 48, 2 KV heads; trained budget 512/);
        const found = await findRetentionGates({path: modelPath, architecture: "qwen3", layers: 4, embeddingLength: 160, headCountKv: 2});
        expect(found).toMatchObject({
            available: true,
            info: {hidden: 48, budget: 512, reduction: "per-head", source: "converted from bf16.pth"}
        });
        const refused = spawnSync(
            "npx",
            [
                "tsx",
                "scripts/retention/convertTrimkv.ts",
                "--weights",
                file("bf16.pth"),
                "--config",
                file("rg2.json"),
                "--model",
                modelPath,
                "--out",
                file("never.gguf")
            ],
            {cwd: root, encoding: "utf8", timeout: 120_000}
        );
        expect(refused.status).toBe(1);
        expect(refused.stderr).toMatch(/^error: config\.json says retention_gate "rg2"/m);
        await expect(fs.access(file("never.gguf"))).rejects.toThrow();
    }, 300_000);

    test("config.json: rg2, another gate, another activation, another model's shape or gate width, a bad budget are refused in words", async () => {
        const convert = (config: string) =>
            refusal(convertTrimkvCheckpoint({weights: file("f32.pth"), config: file(config), modelPath, out: file("never.gguf")}));
        expect(await convert("rg2.json")).toMatch(
            /retention_gate "rg2": these gates read each head's keys and values after RoPE, not the layer's attention input/
        );
        expect(await convert("rg3.json")).toMatch(/retention_gate "rg3"; only the "rg" gate .* can be converted/);
        expect(await convert("gelu.json")).toMatch(/hidden_act "gelu"; the gate runs SiLU only/);
        expect(await convert("other-model.json")).toMatch(
            /config\.json is for a model with 28 layers \(num_hidden_layers\); this model has 4/
        );
        expect(await convert("other-hidden.json")).toMatch(/retention_gate_intermediate_size 512, but the gates are 48 wide/);
        expect(await convert("bad-budget.json")).toMatch(/memory_size -3 is not a number of cells/);
        expect(await convert("missing.json")).toMatch(/missing\.json does not exist/);
        const written = await convertTrimkvCheckpoint({weights: file("f32.pth"), config: file("rg.json"), modelPath, out: file("rg.gguf")});
        expect(written).toMatchObject({budget: 512, baseModel: "Qwen/Qwen3-1.7B"});
        await expect(fs.access(file("never.gguf"))).rejects.toThrow();
    });

    test("a missing layer or key is refused as convertTrimkv.py refuses it", async () => {
        for (const [weights, reason] of [
            ["no-layer-3.pth", /the checkpoint has gates for layers \[0, 1, 2\]\.\.\.\[0, 1, 2\] \(3 layers\); the model has 4 layers/],
            ["no-linear2.pth", /layer 1: missing model\.layers\.1\.self_attn\.retention_gate\.linear2\.weight/]
        ] as const) {
            expect(await refusal(convertTrimkvCheckpoint({weights: file(weights), modelPath, out: file("never.gguf")}))).toMatch(reason);
            const py = pythonConvert(["--weights", file(weights), "--model", modelPath, "--out", file("never.gguf")]);
            expect(py.status).not.toBe(0);
            expect(py.stderr).toMatch(reason);
        }
        // another model: the gates' width and KV heads differ
        const llama = await getFixtureModelInfo("tiny-llama");
        expect(await refusal(convertTrimkvCheckpoint({weights: file("f32.pth"), modelPath: llama.path, out: file("never.gguf")}))).toMatch(
            /layer 0: retention_gate\.linear1\.weight has shape \[48, 160\], expected \[48, 64\]/
        );
        await expect(fs.access(file("never.gguf"))).rejects.toThrow();
    });

    test("a truncated, damaged or foreign file is refused with the reason", async () => {
        const whole = await fs.readFile(file("f32.pth"));
        await fs.writeFile(file("truncated.pth"), whole.subarray(0, Math.floor(whole.length * 0.6)));
        expect(await refusal(readTorchStateDict(file("truncated.pth")))).toMatch(
            /truncated\.pth is not a PyTorch checkpoint: not a whole zip archive .*a download cut short/
        );
        // one byte of a storage changed: its CRC-32 no longer matches
        const damaged = Buffer.from(whole);
        const at = damaged.indexOf(Buffer.from("f32/data/1")) + 200;
        damaged[at] = damaged[at]! ^ 0xff;
        await fs.writeFile(file("damaged.pth"), damaged);
        expect(await refusal(readTorchStateDict(file("damaged.pth")))).toMatch(
            /damaged\.pth: f32\/data\/\d+ is damaged \(its CRC-32 does not match\)/
        );
        await fs.writeFile(file("text.pth"), "not a checkpoint at all\n".repeat(10));
        expect(await refusal(readTorchStateDict(file("text.pth")))).toMatch(/text\.pth is not a PyTorch checkpoint/);
        expect(await refusal(readTorchStateDict(modelPath))).toMatch(/tiny-qwen3\.gguf is not a PyTorch checkpoint/);
        expect(await refusal(readTorchStateDict(file("absent.pth")))).toMatch(/absent\.pth does not exist/);
    });

    test("hostile sizes: a view past its storage, a storage shorter than its element count, huge strides and counts", async () => {
        expect(await refusal(readTorchStateDict(file("past-storage.pth")))).toMatch(
            /tensor w \(size \[2, 3\], stride \[3, 1\], offset 1\) reads past its storage of 6 elements/
        );
        expect(await refusal(readTorchStateDict(file("short-storage.pth")))).toMatch(
            /archive\/data\/0 is 24 bytes; its tensors' storage needs 2400/
        );
        expect(await refusal(readTorchStateDict(file("huge-stride.pth")))).toMatch(/tensor w .* reads past its storage of 6 elements/);
        expect(await refusal(readTorchStateDict(file("huge-numel.pth")))).toMatch(/its storages hold more than \d+ bytes or \d+ elements/);
        // an end-of-directory record claiming 2^31 entries (the zip reader would make a slot for each before reading one)
        const whole = await fs.readFile(file("f32.pth"));
        const eocd = whole.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
        const zip64 = whole.lastIndexOf(Buffer.from([0x50, 0x4b, 0x06, 0x06]));
        expect(zip64).toBeGreaterThan(0); // torch writes a zip64 record
        whole.writeUInt16LE(0xffff, eocd + 10);
        whole.writeBigUInt64LE(2n ** 31n, zip64 + 32);
        await fs.writeFile(file("many-entries.pth"), whole);
        expect(await refusal(readTorchStateDict(file("many-entries.pth")))).toMatch(
            /the archive claims 2147483648 entries, more than the 100000 read/
        );
        expect(await refusal(readTorchStateDict(file("f32.pth"), {pickleBytes: 100}))).toMatch(
            /data\.pkl is \d+ bytes, more than the 100 read/
        );
        expect(await refusal(readTorchStateDict(file("f32.pth"), {elements: 1000}))).toMatch(/more than .*1000 elements/);
    });

    test("a pickle that would run a command is refused by name, and nothing runs", async () => {
        expect(await refusal(readTorchStateDict(file("evil.pth")))).toMatch(
            /the global posix\.system, which a state_dict of tensors does not need; it was refused and nothing was run/
        );
        expect(await refusal(convertTrimkvCheckpoint({weights: file("evil.pth"), modelPath, out: file("never.gguf")}))).toMatch(
            /posix\.system/
        );
        await expect(fs.access(file("evil-ran"))).rejects.toThrow();
        // the file is real: torch.load (weights_only=False, as torch 1.x loads by default) runs the command
        torchJobs([{job: "load", path: file("evil.pth")}]);
        await expect(fs.access(file("evil-ran"))).resolves.toBeUndefined();
    });

    test("in the app: a model's details offer TRIM-KV once its gates are converted from a picked file; a refused file changes nothing", async () => {
        const appModel = file("app-model.gguf");
        await fs.copyFile(info.path, appModel);
        const services = new AppServices(new AppDatabase(":memory:"), new FakeEngine().asEngine(), () => {}, {
            version: "test",
            modelsDir: dir,
            chat: {flushIntervalMs: 0}
        });
        let picked: {weights: string; config: string | null} | null = {weights: file("bf16.pth"), config: file("rg2.json")};
        const dispatch = createDispatch(
            createHandlers(services, {openExternal: async () => {}, pickModelFile: async () => null, pickTrimkvFiles: async () => picked})
        );
        try {
            const added = await dispatch("models:add", {path: appModel});
            if (!added.ok) throw new Error(added.error.message);
            const id = (added.value as {id: string}).id;
            expect(await dispatch("models:details", {id})).toMatchObject({
                ok: true,
                value: {retention: {available: false, reason: /^no retention gates beside this model/}}
            });

            const rg2 = await dispatch("models:pickTrimkv", undefined);
            expect(rg2).toEqual({ok: true, value: picked});
            expect(await dispatch("models:convertTrimkv", {id, weights: file("bf16.pth"), config: file("rg2.json")})).toMatchObject({
                ok: false,
                error: {code: "BAD_REQUEST", message: /^The TRIM-KV gates could not be converted: config\.json says retention_gate "rg2"/}
            });
            expect(await dispatch("models:convertTrimkv", {id, weights: file("evil.pth")})).toMatchObject({
                ok: false,
                error: {code: "BAD_REQUEST", message: /global posix\.system/}
            });
            expect(await dispatch("models:details", {id})).toMatchObject({ok: true, value: {retention: {available: false}}});

            picked = {weights: file("bf16.pth"), config: file("rg.json")};
            expect(await dispatch("models:convertTrimkv", {id, weights: picked.weights, config: picked.config})).toEqual({
                ok: true,
                value: {layers: 4, hidden: 48, budget: 512, baseModel: "Qwen/Qwen3-1.7B", source: "converted from bf16.pth"}
            });
            expect(await dispatch("models:details", {id})).toMatchObject({ok: true, value: {retention: {available: true, reason: null}}});
            const found = await findRetentionGates({
                path: appModel,
                architecture: "qwen3",
                layers: 4,
                embeddingLength: 160,
                headCountKv: 2
            });
            expect(found).toMatchObject({available: true, info: {budget: 512, reduction: "per-head"}});
        } finally {
            await services.dispose();
        }
    });
});
