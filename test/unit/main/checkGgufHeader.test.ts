import {mkdtemp, rm, writeFile} from "node:fs/promises";
import {tmpdir} from "node:os";
import path from "node:path";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import {AppError} from "../../../main/AppError.js";
import {checkGgufHeader, describeSizes} from "../../../main/engine/gguf/checkGgufHeader.js";
import {inspectModel} from "../../../main/engine/runtime/inspectModel.js";
import {writeCorruptModels, type CorruptModel} from "../../fixtures/gguf/corruptModels.js";
import {FIXTURE_NAMES, getFixtureModel, REPO_ROOT} from "../../fixtures/gguf/fixtures.js";
import {encodeGguf, GgmlType, gguf} from "../../fixtures/gguf/writeGguf.js";

let dir: string;
let corrupt: CorruptModel[];

beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "ponder-gguf-check-"));
    corrupt = await writeCorruptModels(path.join(dir, "corrupt"), await getFixtureModel("tiny-qwen2"));
}, 120_000);

afterAll(async () => {
    await rm(dir, {recursive: true, force: true});
});

describe("GGUF header check", () => {
    it("passes every generated fixture and the shipped demo model, with their architecture and data extent", async () => {
        const valid = [
            ...(await Promise.all(FIXTURE_NAMES.filter((name) => !name.startsWith("bench-")).map(getFixtureModel))),
            path.join(REPO_ROOT, "resources/models/ponder-demo.gguf")
        ];
        const architectures = new Set<string>();
        for (const file of valid) {
            const header = await checkGgufHeader(file);
            architectures.add(header.architecture!);
            expect(header.tensorCount).toBeGreaterThan(0);
            expect(header.dataOffset % header.alignment).toBe(0);
        }
        expect([...architectures].sort()).toEqual(["llama", "qwen2", "qwen3"]);
    }, 120_000);

    it("passes every ggml type it knows, with the file exactly as long as the tensors need", async () => {
        const file = path.join(dir, "types.gguf");
        const data = encodeGguf({
            metadata: [
                ["general.architecture", gguf.string("llama")],
                ["general.alignment", gguf.u32(64)]
            ],
            tensors: [
                {name: "a", dims: [8, 3], type: GgmlType.F16, data: new Float32Array(24)},
                {name: "b", dims: [5], type: GgmlType.F32, data: new Float32Array(5)}
            ]
        });
        await writeFile(file, data);
        expect(await checkGgufHeader(file)).toMatchObject({
            version: 3,
            tensorCount: 2,
            kvCount: 2,
            alignment: 64,
            architecture: "llama",
            dataBytes: 128
        });
        expect((await checkGgufHeader(file)).dataOffset + 128).toBe(data.length);
    });

    it("counts the parameters and names the type most layer matrices are stored in", async () => {
        const file = path.join(dir, "quantized.gguf");
        await writeFile(
            file,
            encodeGguf({
                metadata: [["general.architecture", gguf.string("llama")]],
                tensors: [
                    {name: "token_embd.weight", dims: [64, 10], type: GgmlType.F32, data: new Float32Array(640)},
                    {name: "blk.0.attn_q.weight", dims: [64, 64], type: GgmlType.F16, data: new Float32Array(4096)},
                    {name: "blk.0.ffn_up.weight", dims: [64, 64], type: GgmlType.F16, data: new Float32Array(4096)},
                    {name: "blk.0.attn_k.weight", dims: [64, 32], type: GgmlType.F32, data: new Float32Array(2048)},
                    {name: "blk.0.attn_norm.weight", dims: [64], type: GgmlType.F32, data: new Float32Array(64)}
                ]
            })
        );
        // F16 holds 16 KiB of the layer's matrices, F32 8 KiB; the 1-D norm and the embeddings do not count.
        expect(await checkGgufHeader(file)).toMatchObject({parameterCount: 640 + 4096 * 2 + 2048 + 64, weightType: "F16"});
    });

    it("refuses each of at least 25 damaged or hostile files with MODEL_INVALID naming what is wrong", async () => {
        expect(corrupt.length).toBeGreaterThanOrEqual(25);
        for (const model of corrupt) {
            const error = await inspectModel(model.path).catch((err: unknown) => err);
            expect(error, model.name).toBeInstanceOf(AppError);
            expect((error as AppError).code, model.name).toBe("MODEL_INVALID");
            expect((error as AppError).message, model.name).toMatch(model.error);
        }
    });

    it("reads a 2^48-item array count and a 2^50 key count in bounded memory and time", async () => {
        const before = process.memoryUsage().rss;
        const start = performance.now();
        for (const name of ["array-count-2-48", "string-array-count-2-48", "kv-count-2-50", "key-length-2-31"])
            await expect(checkGgufHeader(corrupt.find((model) => model.name === name)!.path)).rejects.toMatchObject({
                code: "MODEL_INVALID"
            });
        expect(performance.now() - start).toBeLessThan(2000);
        expect(process.memoryUsage().rss - before).toBeLessThan(64 * 1024 * 1024);
    });

    it("says what is wrong in words a person can act on", async () => {
        const find = (name: string) => corrupt.find((entry) => entry.name === name)!.path;
        await expect(checkGgufHeader(find("key-length-2-31"))).rejects.toThrow(
            "key-length-2-31.gguf is not a usable GGUF model: the header announces 1 key/value pairs and 0 tensors, more than the 8 bytes left in the file can hold"
        );
        await expect(checkGgufHeader(find("key-length-2-31-padded"))).rejects.toThrow(
            "is not a usable GGUF model: the name of key/value pair 0 is 2147483648 bytes long, but only 64 bytes are left in the file"
        );
    });
});

describe("describeSizes", () => {
    it("says bytes where the rounded sizes would read the same, and MiB otherwise", () => {
        expect(describeSizes(5_101_773, 5_106_880)).toBe("5,101,773 bytes on disk, the header describes 5,106,880 bytes");
        expect(describeSizes(1_048_576, 10_485_760)).toBe("1.0 MiB on disk, the header describes 10.0 MiB");
        expect(describeSizes(100, 200)).toBe("100 bytes on disk, the header describes 200 bytes");
    });
});
