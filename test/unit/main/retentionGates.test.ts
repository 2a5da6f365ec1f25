// TRIM-KV's retention gate files, checked before anything native sees them: a good one, and every way one can be wrong
// (another model, another shape, truncated, garbage, a tensor missing), each refused in words; the model's fingerprint
// computed independently here; and TRIM-KV refused with the reason through the API and IPC when the model has no gates.
import {createHash} from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import OpenAI from "openai";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import type {EventChannel, Events} from "../../../preload/contract.js";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {createDispatch} from "../../../main/ipc/dispatch.js";
import {createHandlers} from "../../../main/ipc/handlers.js";
import {findRetentionGates, retentionSidecarPath, type RetentionModel} from "../../../main/engine/retention/findRetentionGates.js";
import {fingerprintSpan, modelFingerprint} from "../../../main/engine/retention/modelFingerprint.js";
import {inspectModel} from "../../../main/engine/runtime/inspectModel.js";
import {resolveCombine} from "../../../main/engine/policies/decide.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {estimateBudget} from "../../../main/services/CompressionService.js";
import {defaultCompressionSettings} from "../../../main/services/schemas.js";
import {mulberry32} from "../../fixtures/gguf/random.js";
import type {RetentionGateLayer} from "../../../main/engine/retention/gateLayer.js";
import {writeRetentionSidecar, type SidecarSpec} from "../../fixtures/gguf/retentionSidecar.js";
import {gguf} from "../../fixtures/gguf/writeGguf.js";
import {FakeEngine} from "./FakeEngine.js";
import {serveApi} from "./serveApi.js";

let dir: string;
beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "ponder-retention-"));
});
afterAll(async () => {
    await fs.rm(dir, {recursive: true, force: true});
});

/** A stand-in model file of `size` seeded bytes (the checks read its bytes and the shape given here, not its tensors). */
async function modelFile(name: string, size: number, seed = 1): Promise<string> {
    const random = mulberry32(seed);
    const bytes = Buffer.alloc(size);
    for (let i = 0; i < size; i += 4096) bytes[i] = random.int(256);
    const file = path.join(dir, name);
    await fs.writeFile(file, bytes);
    return file;
}

/** The fingerprint as the contract words it: size, "\n", the first 8 MiB, the last 8 MiB (whole reads, no streaming). */
async function expectedFingerprint(file: string): Promise<string> {
    const bytes = await fs.readFile(file);
    const span = 8 * 1024 * 1024;
    return createHash("sha256")
        .update(`${bytes.length}\n`)
        .update(bytes.subarray(0, Math.min(bytes.length, span)))
        .update(bytes.subarray(Math.max(0, bytes.length - span)))
        .digest("hex");
}

const shape = {architecture: "qwen2", layers: 2, embeddingLength: 16, headCountKv: 2};

/** A model with a sidecar beside it, the sidecar written by the fixture writer with `spec`'s changes. */
async function withSidecar(name: string, spec: Partial<SidecarSpec> = {}): Promise<RetentionModel & {sidecar: string}> {
    const file = await modelFile(`${name}.gguf`, 64 * 1024);
    const sidecar = retentionSidecarPath(file);
    await writeRetentionSidecar(sidecar, {modelPath: file, architecture: "qwen2", layers: 2, width: 16, kvHeads: 2, hidden: 8, ...spec});
    return {path: file, ...shape, sidecar};
}

describe("the model's fingerprint", () => {
    it("hashes the size and 8 MiB from each end, streaming, for a model larger than both ends together", async () => {
        expect(fingerprintSpan).toBe(8 * 1024 * 1024);
        const large = await modelFile("large.gguf", 20 * 1024 * 1024 + 123, 2);
        expect(await modelFingerprint(large)).toBe(await expectedFingerprint(large));
    });

    it("hashes the whole file twice for a small one, and is read again when the file changes", async () => {
        const small = await modelFile("small.gguf", 5000, 3);
        const before = await modelFingerprint(small);
        expect(before).toBe(await expectedFingerprint(small));
        await fs.writeFile(small, Buffer.alloc(5000, 7));
        await fs.utimes(small, new Date(), new Date(Date.now() + 5000));
        expect(await modelFingerprint(small)).toBe(await expectedFingerprint(small));
        expect(await modelFingerprint(small)).not.toBe(before);
    });
});

describe("finding and checking a model's retention gates", () => {
    it("names the sidecar beside the model", () => {
        expect(retentionSidecarPath("/models/ponder-demo.gguf")).toBe("/models/ponder-demo.retention.gguf");
        expect(retentionSidecarPath("/models/Model.GGUF")).toBe("/models/Model.retention.gguf");
    });

    it("accepts gates trained for this model file, F32 or with F16 weights, and says what they hold", async () => {
        const model = await withSidecar("good");
        const found = await findRetentionGates(model);
        expect(found).toMatchObject({
            available: true,
            path: model.sidecar,
            info: {
                version: 1,
                gate: "trimkv-rg",
                activation: "silu",
                modelArchitecture: "qwen2",
                layers: 2,
                embeddingLength: 16,
                headCountKv: 2,
                hidden: 8,
                budget: null,
                reduction: "shared"
            }
        });
        // Per layer: fc1 16 x 8 and fc2 8 x 2 in F32, biases of 8 and 2: (128 + 8 + 16 + 2) x 4 bytes.
        expect(found.available && found.info.weightBytes).toBe(2 * (128 + 8 + 16 + 2) * 4);
        const half = await withSidecar("half", {weightType: "f16", overrides: {"ponder.retention.budget": gguf.u32(512)}});
        const f16 = await findRetentionGates(half);
        expect(f16).toMatchObject({available: true, info: {budget: 512}});
        expect(f16.available && f16.info.weightBytes).toBe(2 * ((128 + 16) * 2 + (8 + 2) * 4));
    });

    it("says so in words when there is none", async () => {
        const file = await modelFile("bare.gguf", 1000);
        expect(await findRetentionGates({path: file, ...shape})).toEqual({
            available: false,
            reason: `no retention gates beside this model (expected ${path.join(dir, "bare.retention.gguf")})`
        });
    });

    it("refuses gates trained for another model file: another fingerprint, or the model changed since", async () => {
        const other = await withSidecar("other", {overrides: {"ponder.retention.model.fingerprint": gguf.string("ab".repeat(32))}});
        expect(await findRetentionGates(other)).toEqual({
            available: false,
            reason: "the gates were trained for another model file (its fingerprint differs)"
        });
        const changed = await withSidecar("changed");
        await fs.appendFile(changed.path, "x");
        expect(await findRetentionGates(changed)).toMatchObject({
            available: false,
            reason: /another model file \(its fingerprint differs\)/
        });
    });

    it("refuses gates made for another shape or architecture, naming the difference", async () => {
        const layers = await withSidecar("layers", {overrides: {"ponder.retention.model.block_count": gguf.u32(7)}});
        expect(await findRetentionGates(layers)).toEqual({
            available: false,
            reason: "the gates were trained for another model file (7 layers; this model has 2)"
        });
        const heads = await withSidecar("heads", {overrides: {"ponder.retention.model.head_count_kv": gguf.u32(4)}});
        expect(await findRetentionGates(heads)).toMatchObject({available: false, reason: /\(4 KV heads; this model has 2\)/});
        const arch = await withSidecar("arch", {overrides: {"ponder.retention.model.architecture": gguf.string("llama")}});
        expect(await findRetentionGates(arch)).toMatchObject({available: false, reason: /\(a llama model; this one is qwen2\)/});
    });

    it("calls a truncated file, garbage, a foreign GGUF and a missing tensor corrupt, saying what is wrong", async () => {
        const truncated = await withSidecar("truncated");
        const bytes = await fs.readFile(truncated.sidecar);
        await fs.writeFile(truncated.sidecar, bytes.subarray(0, bytes.length - 100));
        expect(await findRetentionGates(truncated)).toMatchObject({available: false, reason: /^corrupt: .*truncated/});

        const garbage = await withSidecar("garbage");
        await fs.writeFile(garbage.sidecar, Buffer.from("this is no gate file at all\n".repeat(40)));
        expect(await findRetentionGates(garbage)).toMatchObject({
            available: false,
            reason: /^corrupt: .*does not start with the GGUF signature/
        });

        const foreign = await withSidecar("foreign", {overrides: {"general.architecture": gguf.string("llama")}});
        expect(await findRetentionGates(foreign)).toMatchObject({available: false, reason: /^corrupt: .*not a retention gate file/});

        const missing = await withSidecar("missing", {omit: ["blk.1.retention.fc2.weight"]});
        expect(await findRetentionGates(missing)).toEqual({
            available: false,
            reason: "corrupt: missing.retention.gguf: the tensor blk.1.retention.fc2.weight is missing"
        });

        const hidden = await withSidecar("hidden", {overrides: {"ponder.retention.hidden": gguf.u32(9)}});
        expect(await findRetentionGates(hidden)).toMatchObject({
            available: false,
            reason: /blk\.0\.retention\.fc1\.weight is \[16, 8\], expected \[16, 9\]/
        });

        const version = await withSidecar("version", {overrides: {"ponder.retention.version": gguf.u32(2)}});
        expect(await findRetentionGates(version)).toMatchObject({
            available: false,
            reason: /format version 2; this Ponder reads version 1/
        });

        const reduction = await withSidecar("reduction", {overrides: {"ponder.retention.reduction": gguf.string("mean")}});
        expect(await findRetentionGates(reduction)).toMatchObject({available: false, reason: /unknown reduction "mean"/});
    });
});

describe("gates whose values cannot run", () => {
    it("refuses a NaN in an F32 fc1.weight, naming the tensor and the element (torch layout [hidden, width])", async () => {
        const model = await withSidecar("nan-fc1", {
            edit: (gates) => {
                gates[1]!.fc1[3 * 16 + 5] = NaN;
            }
        });
        expect(await findRetentionGates(model)).toEqual({
            available: false,
            reason: "the gates in nan-fc1.retention.gguf cannot run: the tensor blk.1.retention.fc1.weight holds NaN at [3, 5]"
        });
    });

    it("refuses an infinity in an F16 matrix, and in a bias", async () => {
        const half = await withSidecar("inf-f16", {
            weightType: "f16",
            edit: (gates) => {
                gates[0]!.fc2[1 * 8 + 6] = -Infinity;
            }
        });
        expect(await findRetentionGates(half)).toEqual({
            available: false,
            reason: "the gates in inf-f16.retention.gguf cannot run: the tensor blk.0.retention.fc2.weight holds -Inf at [1, 6]"
        });
        // 1e5 is finite in F32 but past F16's largest (65504): written as F16 it is +Inf.
        const rounded = await withSidecar("inf-f16-rounded", {
            weightType: "f16",
            edit: (gates) => {
                gates[1]!.fc1[0] = 1e5;
            }
        });
        expect(await findRetentionGates(rounded)).toMatchObject({
            available: false,
            reason: /blk\.1\.retention\.fc1\.weight holds \+Inf at \[0, 0\]$/
        });
        const bias = await withSidecar("inf-bias", {
            edit: (gates) => {
                gates[1]!.bias[1] = Infinity;
            }
        });
        expect(await findRetentionGates(bias)).toMatchObject({available: false, reason: /blk\.1\.retention\.bias holds \+Inf at \[1\]$/});
    });

    it("refuses finite gates whose logits leave F32's range on the large probe, naming the layer and the probe", async () => {
        // 32 hidden units in pairs reading one input each, +w and -w: SiLU passes the positive one, so the hidden layer holds
        // w |x_k| for every k, and with fc2 all v the logit is v w sum |x_k| (+ the bias). For any x of RMS r over 16 inputs,
        // 4r <= sum |x_k| <= 16r. With w = v = 1e18: at most 1.6e37 at RMS 1 (finite in F32), at least 4e38 at RMS 100
        // (past 3.4e38). With v = 1e17 at most 1.6e38 even at RMS 100.
        const pairs =
            (v: number, w = 1e18) =>
            (gates: RetentionGateLayer[]) => {
                for (const gate of gates) {
                    gate.fc1.fill(0);
                    for (let k = 0; k < 16; k++) {
                        gate.fc1[2 * k * 16 + k] = w;
                        gate.fc1[(2 * k + 1) * 16 + k] = -w;
                    }
                    gate.fc1Bias.fill(0);
                    gate.fc2.fill(v);
                }
            };
        const model = await withSidecar("overflow", {hidden: 32, edit: pairs(1e18)});
        expect(await findRetentionGates(model)).toEqual({
            available: false,
            reason: "the gates in overflow.retention.gguf cannot run: layer 0's gate gives a non-finite logit for KV head 0 on a seeded input of RMS 100"
        });
        expect(await findRetentionGates(await withSidecar("overflow-not", {hidden: 32, edit: pairs(1e17)}))).toMatchObject({
            available: true
        });
        // With w = 1e37 the hidden layer itself leaves F32's range at RMS 100 (some |x_k| >= 100), before fc2 (1e-30) is read.
        expect(await findRetentionGates(await withSidecar("overflow-hidden", {hidden: 32, edit: pairs(1e-30, 1e37)}))).toMatchObject({
            available: false,
            reason: /^the gates in overflow-hidden\.retention\.gguf cannot run: layer 0's gate gives a non-finite value in hidden unit \d+ on a seeded input of RMS 100$/
        });
    });

    it("refuses the demo model's gates with their last 40 KB of floats NaN, and accepts the shipped ones", async () => {
        const demo = path.resolve(import.meta.dirname, "../../../resources/models/ponder-demo.gguf");
        const inspection = await inspectModel(demo);
        expect(await findRetentionGates(inspection)).toMatchObject({available: true, info: {reduction: "shared", hidden: 512}});

        const copy = path.join(dir, "demo-nan.gguf");
        await fs.copyFile(demo, copy);
        const sidecar = await fs.readFile(retentionSidecarPath(demo));
        const tail = new Float32Array(sidecar.buffer, sidecar.byteOffset + sidecar.length - 40 * 1024, 10 * 1024);
        tail.fill(NaN);
        await fs.writeFile(retentionSidecarPath(copy), sidecar);
        const found = await findRetentionGates({...inspection, path: copy});
        expect(found).toEqual({
            available: false,
            reason: "the gates in demo-nan.retention.gguf cannot run: the tensor blk.3.retention.fc1.bias holds NaN at [0]"
        });
        // The controller's estimate lists TRIM-KV as unavailable with that reason.
        const estimate = estimateBudget(inspection, {...defaultCompressionSettings, policy: "trimkv"}, 1 << 30, {retention: found});
        expect(estimate.unavailablePolicies).toEqual([{policy: "trimkv", reason: found.available ? "" : found.reason}]);
    });

    it("the shipped gates say how they were fitted: the merge model's per head (per-head cells under auto), the demo's for the shared max", async () => {
        const merge = path.resolve(import.meta.dirname, "../../../resources/models/ponder-merge.gguf");
        const found = await findRetentionGates(await inspectModel(merge));
        expect(found).toMatchObject({available: true, info: {reduction: "per-head", calibration: {promptSet: "merge"}}});
        expect(found.available && found.info.source).toMatch(/fitted per layer and KV head/);
        expect(resolveCombine("auto", "trimkv", found.available ? found.info.reduction : undefined)).toBe("heads");
        expect(resolveCombine("auto", "trimkv", "shared")).toBe("aggregate");
    });
});

describe("TRIM-KV in the estimate", () => {
    const model = {
        path: "/m.gguf",
        name: "m",
        sizeBytes: 1,
        architecture: "qwen2",
        contextLength: 4096,
        layers: 2,
        headCount: 4,
        headCountKv: 2,
        embeddingLength: 16,
        hasChatTemplate: true
    };
    const trimkv = {...defaultCompressionSettings, policy: "trimkv" as const, budget: {kind: "cells" as const, cells: 512}};

    it("counts the gates' weights and 4 bytes per cell, layer and KV head when the model has gates", async () => {
        const gates = await withSidecar("estimate");
        const found = await findRetentionGates(gates);
        const estimate = estimateBudget(model, trimkv, 1 << 30, {retention: found});
        const weightBytes = found.available ? found.info.weightBytes : 0;
        expect(estimate.retentionBytes).toBe(weightBytes + 4 * 2 * 2 * 512);
        expect(estimate.unavailablePolicies).toEqual([]);
        // StreamingLLM reads no scores either: the same context but for the gates.
        const streaming = estimateBudget(model, {...trimkv, policy: "streamingllm"}, 1 << 30, {retention: found});
        expect(streaming.retentionBytes).toBe(0);
        expect(estimate.neededBytes - streaming.neededBytes).toBe(estimate.retentionBytes);
    });

    it("counts LAVa's value norms, 4 bytes per cell, layer and KV head, beside its scores", () => {
        const lava = estimateBudget(model, {...trimkv, policy: "lava"}, 1 << 30);
        const lethe = estimateBudget(model, {...trimkv, policy: "lethe"}, 1 << 30);
        expect(lava.valueNormBytes).toBe(4 * 2 * 2 * 512);
        expect(lethe.valueNormBytes).toBe(0);
        expect(lava.scoresBytes).toBe(lethe.scoresBytes);
    });

    it("lists TRIM-KV as unavailable, with the reason, for a model without gates", () => {
        const retention = {available: false as const, reason: "no retention gates beside this model (expected /m.retention.gguf)"};
        const estimate = estimateBudget(model, trimkv, 1 << 30, {retention});
        expect(estimate.unavailablePolicies).toEqual([{policy: "trimkv", reason: retention.reason}]);
        expect(estimate.notes).toContain(`TRIM-KV cannot run on this model: ${retention.reason}.`);
        expect(estimate.retentionBytes).toBe(0);
    });
});

describe("TRIM-KV for a model without gates", () => {
    function setup() {
        const engine = new FakeEngine();
        engine.inspection = {...engine.inspection!, path: path.join(dir, "no-gates.gguf")};
        engine.status = {
            ...engine.status,
            model: {
                id: "m1",
                path: engine.inspection.path,
                name: "no-gates",
                sizeBytes: 1,
                architecture: "llama",
                contextLength: 4096,
                addedAt: 0,
                lastUsedAt: null,
                crashedAt: null
            }
        };
        const events: {channel: EventChannel; payload: unknown}[] = [];
        const services = new AppServices(
            new AppDatabase(":memory:"),
            engine.asEngine(),
            <C extends EventChannel>(channel: C, payload: Events[C]) => {
                events.push({channel, payload});
            },
            {version: "test", modelsDir: dir, chat: {flushIntervalMs: 0}}
        );
        return {engine, services, events};
    }

    it("is refused through the API with the reason (400, policy_unavailable on ponder.policy), never run as another policy", async () => {
        const {engine, services} = setup();
        try {
            const {client} = await serveApi(services);
            const request = {model: "no-gates", messages: [{role: "user", content: "2+2?"}], ponder: {policy: "trimkv"}};
            const error = await client.chat.completions
                .create(request as OpenAI.ChatCompletionCreateParamsNonStreaming)
                .catch((err: unknown) => err);
            expect(error).toBeInstanceOf(OpenAI.APIError);
            expect(error).toMatchObject({status: 400, code: "policy_unavailable", param: "ponder.policy"});
            expect((error as Error).message).toMatch(
                /TRIM-KV needs retention gates trained for this model: no retention gates beside this model \(expected .*no-gates\.retention\.gguf\)/
            );
            expect(engine.requests).toEqual([]);
        } finally {
            await services.dispose();
        }
    });

    it("through IPC: the estimate lists it unavailable with the reason, and an answer asked for under it fails with the reason", async () => {
        const {engine, services, events} = setup();
        try {
            const dispatch = createDispatch(createHandlers(services, {openExternal: async () => {}, pickModelFile: async () => null}));
            const trimkv = {...defaultCompressionSettings, policy: "trimkv" as const};
            const estimate = await dispatch("compression:estimate", {compression: trimkv});
            expect(estimate).toMatchObject({
                ok: true,
                value: {unavailablePolicies: [{policy: "trimkv", reason: /^no retention gates beside this model/}]}
            });

            const conversation = services.conversations.create();
            expect(await dispatch("conversations:updateSettings", {id: conversation.id, settings: {compression: trimkv}})).toMatchObject({
                ok: true
            });
            expect(await dispatch("chat:send", {conversationId: conversation.id, text: "2+2?"})).toMatchObject({ok: true});
            await services.chat.idle();
            const done = events
                .filter((event) => event.channel === "chat:done")
                .map((event) => event.payload as Events["chat:done"])
                .at(-1)!;
            expect(done.message).toMatchObject({
                status: "error",
                error: expect.stringMatching(/^TRIM-KV needs retention gates trained for this model: no retention gates/)
            });
            expect(engine.requests).toEqual([]);
        } finally {
            await services.dispose();
        }
    });
});
