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
import {findRetentionGates, retentionSidecarPath} from "../../main/engine/retention/findRetentionGates.js";
import {convertTrimkvCheckpoint} from "../../main/engine/retention/trimkvCheckpoint/convertTrimkvCheckpoint.js";
import {readTorchStateDict, type ReadTorchLimits} from "../../main/engine/retention/trimkvCheckpoint/readTorchStateDict.js";
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
            {...trimkv, out: file("huge.pth"), seed: 6, dtype: "f32", scale: 1e6},
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

    /** The end-of-central-directory record's and the zip64 record's offsets in a torch.save file. */
    const endRecords = (whole: Buffer) => {
        const eocd = whole.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
        const zip64 = whole.lastIndexOf(Buffer.from([0x50, 0x4b, 0x06, 0x06]));
        expect(eocd).toBeGreaterThan(0);
        expect(zip64).toBeGreaterThan(0); // torch writes a zip64 record
        return {eocd, zip64};
    };

    // Each bad file: how it is made (from f32.pth's bytes, or one written above), the reader's limits, and the reason.
    const badFiles: {what: string; file: string; make?: (whole: Buffer) => Buffer; limits?: ReadTorchLimits; reason: RegExp}[] = [
        {
            what: "a truncated file",
            file: "truncated.pth",
            make: (whole) => whole.subarray(0, Math.floor(whole.length * 0.6)),
            reason: /truncated\.pth is not a PyTorch checkpoint: not a whole zip archive .*a download cut short/
        },
        {
            what: "one byte of a storage changed: its CRC-32 no longer matches",
            file: "damaged.pth",
            make: (whole) => {
                const damaged = Buffer.from(whole);
                const at = damaged.indexOf(Buffer.from("f32/data/1")) + 200;
                damaged[at] = damaged[at]! ^ 0xff;
                return damaged;
            },
            reason: /damaged\.pth: f32\/data\/\d+ is damaged \(its CRC-32 does not match\)/
        },
        {
            what: "a text file",
            file: "text.pth",
            make: () => Buffer.from("not a checkpoint at all\n".repeat(10)),
            reason: /text\.pth is not a PyTorch checkpoint/
        },
        {what: "a GGUF model", file: "tiny-qwen3.gguf", reason: /tiny-qwen3\.gguf is not a PyTorch checkpoint/},
        {what: "no file", file: "absent.pth", reason: /absent\.pth does not exist/},
        {
            what: "a view past its storage",
            file: "past-storage.pth",
            reason: /tensor w \(size \[2, 3\], stride \[3, 1\], offset 1\) reads past its storage of 6 elements/
        },
        {
            what: "a storage shorter than its element count",
            file: "short-storage.pth",
            reason: /archive\/data\/0 is 24 bytes; its tensors' storage needs 2400/
        },
        {what: "a huge stride", file: "huge-stride.pth", reason: /tensor w .* reads past its storage of 6 elements/},
        {what: "a huge element count", file: "huge-numel.pth", reason: /its storages hold more than \d+ bytes or \d+ elements/},
        {
            // the zip reader would make a slot for each entry before reading one
            what: "both end records claiming 2^31 entries",
            file: "many-entries.pth",
            make: (whole) => {
                const {eocd, zip64} = endRecords(whole);
                const many = Buffer.from(whole);
                many.writeUInt16LE(0xffff, eocd + 10);
                many.writeBigUInt64LE(2n ** 31n, zip64 + 32);
                return many;
            },
            reason: /the archive claims 2147483648 entries, more than the 100000 read/
        },
        {
            // the zip reader reads the plain record's count, another reader the zip64 one's: they must agree
            what: "a zip64 record claiming 2^40 entries where the plain record says the true count",
            file: "zip64-entries.pth",
            make: (whole) => {
                const {eocd, zip64} = endRecords(whole);
                const crafted = Buffer.from(whole);
                expect(crafted.readUInt16LE(eocd + 10)).toBe(Number(crafted.readBigUInt64LE(zip64 + 32)));
                crafted.writeBigUInt64LE(2n ** 40n, zip64 + 32);
                return crafted;
            },
            reason: /zip64-entries\.pth is not a PyTorch checkpoint: its zip64 end record says 1099511627776 entries where its end-of-central-directory record says \d+; a damaged or crafted file/
        },
        {
            what: "a zip64 record whose central directory offset differs from the plain record's",
            file: "zip64-offset.pth",
            make: (whole) => {
                const {zip64} = endRecords(whole);
                const crafted = Buffer.from(whole);
                crafted.writeBigUInt64LE(crafted.readBigUInt64LE(zip64 + 48) - 46n, zip64 + 48);
                return crafted;
            },
            reason: /its zip64 end record says \d+ central directory offset where its end-of-central-directory record says \d+/
        },
        {
            what: "a pickle over the limit",
            file: "f32.pth",
            limits: {pickleBytes: 100},
            reason: /data\.pkl is \d+ bytes, more than the 100 read/
        },
        {what: "more elements than the limit", file: "f32.pth", limits: {elements: 1000}, reason: /more than .*1000 elements/}
    ];

    test.each(badFiles)("$what is refused with the reason, by the reader and the converter", async ({file: name, make, limits, reason}) => {
        const target = name === "tiny-qwen3.gguf" ? modelPath : file(name);
        if (make != null) await fs.writeFile(target, make(await fs.readFile(file("f32.pth"))));
        expect(await refusal(readTorchStateDict(target, limits))).toMatch(reason);
        if (limits == null)
            expect(await refusal(convertTrimkvCheckpoint({weights: target, modelPath, out: file("never.gguf")}))).toMatch(reason);
        await expect(fs.access(file("never.gguf"))).rejects.toThrow();
    });

    test("a weight beyond F16's range: convert:trimkv --type f16 refuses it in one line, the working sidecar stays; F32 holds it", async () => {
        const model = file("huge-model.gguf");
        await fs.copyFile(info.path, model);
        const shape = {path: model, architecture: "qwen3", layers: 4, embeddingLength: 160, headCountKv: 2};
        await convertTrimkvCheckpoint({weights: file("f32.pth"), modelPath: model});
        const sidecar = retentionSidecarPath(model);
        const before = await fs.readFile(sidecar);
        const kept = async () => {
            expect((await fs.readFile(sidecar)).equals(before)).toBe(true);
            expect(await findRetentionGates(shape)).toMatchObject({available: true, info: {source: "converted from f32.pth"}});
            expect((await fs.readdir(dir)).filter((name) => name.endsWith(".tmp"))).toEqual([]);
        };

        const ts = spawnSync(
            "npx",
            ["tsx", "scripts/retention/convertTrimkv.ts", "--weights", file("huge.pth"), "--model", model, "--type", "f16"],
            {cwd: root, encoding: "utf8", timeout: 120_000}
        );
        expect(ts.status).toBe(1);
        expect(ts.stderr).toMatch(
            /^error: the sidecar could not be written: layer 0: retention\.fc1\.weight holds -?[\d.e+]+ at \d+, beyond F16's largest value \(65504\): its matrices must be written as F32\n$/
        );
        await kept();
        const py = pythonConvert(["--weights", file("huge.pth"), "--model", model, "--out", sidecar, "--type", "f16"]);
        expect(py.status).toBe(1);
        expect(py.stderr).toMatch(/^error: layer 0: retention\.fc1\.weight holds -?[\d.e+]+ at \d+, beyond F16's largest value \(65504\)/);
        await kept();

        expect(await convertTrimkvCheckpoint({weights: file("huge.pth"), modelPath: model, type: "f32"})).toMatchObject({
            matrixType: "f32"
        });
        expect(await findRetentionGates(shape)).toMatchObject({available: true, info: {source: "converted from huge.pth"}});
    }, 300_000);

    test("a pickle that would run a command is refused by name, and nothing runs", async () => {
        expect(await refusal(readTorchStateDict(file("evil.pth")))).toMatch(
            /the global posix\.system, which a state_dict of tensors does not need; it was refused and nothing was run/
        );
        expect(await refusal(convertTrimkvCheckpoint({weights: file("evil.pth"), modelPath, out: file("never.gguf")}))).toMatch(
            /posix\.system/
        );
        await expect(fs.access(file("evil-ran"))).rejects.toThrow();
        // convertTrimkv.py loads with torch's weights-only unpickler: refused by name, and nothing runs there either
        const py = pythonConvert(["--weights", file("evil.pth"), "--model", modelPath, "--out", file("never.gguf")]);
        expect(py.status).toBe(1);
        expect(py.stderr).toMatch(
            /evil\.pth: its pickle asks for more than a state_dict of tensors \(.*posix\.system.*\); it was refused and nothing was run/
        );
        await expect(fs.access(file("evil-ran"))).rejects.toThrow();
        await expect(fs.access(file("never.gguf"))).rejects.toThrow();
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
