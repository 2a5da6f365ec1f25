// TRIM-KV gates for a person's model from the app (the authors' released gates, converted, and their trained budget): a
// model of no released shape is told the nearest release and what differs; a model of Qwen3-1.7B's shape (its GGUF
// header alone: the gates need only the shape) is offered the authors' ngocbh/TrimKV-Qwen3-1.7B-Math in its details;
// "Get TRIM-KV gates" downloads config.json and trimkv_weights.pth from $HF_ENDPOINT (a loopback server with checkpoints written by torch), refuses an rg2 config in words with nothing
// installed, then installs the rg gates. A loaded model whose converted gates say memory_size 384 starts new
// conversations there, and is offered 384 cells again when TRIM-KV is chosen after another budget.
// Needs Python with torch (Debian's python3-torch).
import {execFileSync} from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import type {AddressInfo} from "node:net";
import path from "node:path";
import {afterAll, beforeAll, expect, it} from "vitest";
import {gguf, writeGguf} from "../../main/engine/gguf/writeGguf.js";
import {convertTrimkvCheckpoint} from "../../main/engine/retention/trimkvCheckpoint/convertTrimkvCheckpoint.js";
import {getFixtureModelInfo} from "../fixtures/gguf/fixtures.js";
import {torchPython} from "../fixtures/torchPython.js";
import {useApp} from "./appFixture.js";

const root = path.resolve(import.meta.dirname, "../..");
const repo = "ngocbh/TrimKV-Qwen3-1.7B-Math";
const app = useApp("trimkv-gates");
let server: http.Server | null = null;
let tinyModel: string;
let qwenShaped: string;
/** What the stand-in for Hugging Face serves, by path. */
const served = new Map<string, Buffer>();
const savedEndpoint = process.env.HF_ENDPOINT;

/** config.json as the authors write it, for a model of this shape. */
const config = (layers: number, width: number, kvHeads: number, memorySize: number, gate = "rg") =>
    Buffer.from(
        JSON.stringify({
            retention_gate: gate,
            hidden_act: "silu",
            memory_size: memorySize,
            num_hidden_layers: layers,
            hidden_size: width,
            num_key_value_heads: kvHeads,
            base_model: "Qwen/Qwen3-1.7B",
            torch_dtype: "bfloat16"
        })
    );

beforeAll(async () => {
    const dataDir = app.dataDir;
    const own = path.join(dataDir, "own");
    fs.mkdirSync(own);
    // A model with Qwen3-1.7B's shape and name: its header only (no weights), enough for its details and the gates.
    qwenShaped = path.join(own, "Qwen3-1.7B-Q4_K_M.gguf");
    await writeGguf(qwenShaped, {
        tensors: [],
        metadata: [
            ["general.architecture", gguf.string("qwen3")],
            ["general.name", gguf.string("Qwen3 1.7B")],
            ["qwen3.context_length", gguf.u32(40960)],
            ["qwen3.block_count", gguf.u32(28)],
            ["qwen3.embedding_length", gguf.u32(2048)],
            ["qwen3.feed_forward_length", gguf.u32(6144)],
            ["qwen3.attention.head_count", gguf.u32(16)],
            ["qwen3.attention.head_count_kv", gguf.u32(8)],
            ["qwen3.attention.key_length", gguf.u32(128)],
            ["qwen3.attention.value_length", gguf.u32(128)]
        ]
    });
    // The tiny model the app loads, with gates converted from a checkpoint whose config.json says memory_size 384.
    const tiny = await getFixtureModelInfo("tiny-qwen3");
    tinyModel = path.join(own, "tiny-qwen3.gguf");
    fs.copyFileSync(tiny.path, tinyModel);
    const jobs = [
        {job: "trimkv", model: tinyModel, hidden: 16, out: path.join(own, "trimkv_weights.pth"), seed: 3, dtype: "bf16"},
        {job: "trimkv", model: qwenShaped, hidden: 8, out: path.join(dataDir, "qwen3-1.7b.pth"), seed: 4, dtype: "bf16"}
    ];
    execFileSync(torchPython(), [path.join(root, "test/fixtures/torchCheckpoints.py"), JSON.stringify(jobs)], {
        encoding: "utf8",
        timeout: 240_000
    });
    fs.writeFileSync(path.join(own, "config.json"), config(4, tiny.spec.nEmbd, tiny.spec.nHeadKv, 384));
    await convertTrimkvCheckpoint({
        weights: path.join(own, "trimkv_weights.pth"),
        config: path.join(own, "config.json"),
        modelPath: tinyModel
    });

    served.set(`/${repo}/resolve/main/config.json`, config(28, 2048, 8, 512, "rg2"));
    served.set(`/${repo}/resolve/main/trimkv_weights.pth`, fs.readFileSync(path.join(dataDir, "qwen3-1.7b.pth")));
    server = http.createServer((req, res) => {
        const body = served.get(req.url ?? "");
        if (body == null) {
            res.writeHead(404);
            return void res.end("Entry not found");
        }
        res.writeHead(200, {"content-type": "application/octet-stream", "content-length": body.length});
        res.end(req.method === "HEAD" ? undefined : body);
    });
    await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
    process.env.HF_ENDPOINT = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    await app.start({model: tinyModel, seed: 7});
}, 300_000);

afterAll(async () => {
    await new Promise<void>((resolve) => (server == null ? resolve() : server.close(() => resolve())));
    if (savedEndpoint === undefined) delete process.env.HF_ENDPOINT;
    else process.env.HF_ENDPOINT = savedEndpoint;
});

it("gets the authors' gates for a model of a released shape from its details: an rg2 config refused in words, then the rg gates installed", async () => {
    const {page, chat, errors} = await app.open({viewport: {width: 1400, height: 900}});
    await chat.byId("engine-state").filter({hasText: /ready/i}).waitFor({timeout: 60_000});
    // The loaded tiny model is of no released shape: its details say so, with the nearest release and what differs.
    await chat.byId("model-item").filter({hasText: "tiny-qwen3"}).getByTestId("model-details-button").click();
    await expect
        .poll(() => chat.byId("model-details").getByTestId("model-trimkv-none").textContent(), {timeout: 15_000})
        .toMatch(
            /^No TRIM-KV gates were released for a model of this shape\. The nearest release, ngocbh\/TrimKV-Qwen3-1\.7B-Math \(for Qwen3-1\.7B\), differs in layers \(28, this model 4\)/
        );
    expect(await chat.byId("model-details").getByTestId("model-trimkv-release").count()).toBe(0);
    await chat.byId("model-path-input").fill(qwenShaped);
    await chat.byId("model-add-button").click();
    const item = chat.byId("model-item").filter({hasText: "Qwen3 1.7B"});
    await item.waitFor({timeout: 30_000});
    await item.getByTestId("model-details-button").click();
    const details = chat.byId("model-details");
    const button = details.getByTestId("model-trimkv-release");
    await button.waitFor({timeout: 15_000});
    expect(await button.getAttribute("data-repo")).toBe(repo);
    expect(await details.getByTestId("model-trimkv-releases").textContent()).toMatch(
        /from ngocbh\/TrimKV-Qwen3-1\.7B-Math: the authors' gates for Qwen\/Qwen3-1\.7B, trained with 512 cells/
    );
    expect(await details.getByTestId("model-retention").textContent()).toMatch(/TRIM-KV unavailable/);

    await button.click();
    const result = details.getByTestId("model-trimkv-download");
    await expect
        .poll(() => result.textContent(), {timeout: 60_000})
        .toMatch(/Not installed: The TRIM-KV gates could not be converted: config\.json says retention_gate "rg2"/);
    expect(fs.existsSync(qwenShaped.replace(/\.gguf$/, ".retention.gguf"))).toBe(false);

    served.set(`/${repo}/resolve/main/config.json`, config(28, 2048, 8, 512));
    await button.click();
    await expect
        .poll(() => result.textContent(), {timeout: 60_000})
        .toMatch(
            /✓ Installed the gates from ngocbh\/TrimKV-Qwen3-1\.7B-Math: 28 layers \(hidden 8\), trained with 512 cells on Qwen\/Qwen3-1\.7B/
        );
    await expect.poll(() => details.getByTestId("model-retention").textContent(), {timeout: 15_000}).toMatch(/✓ TRIM-KV gates/);
    expect(fs.existsSync(qwenShaped.replace(/\.gguf$/, ".retention.gguf"))).toBe(true);
    await page.screenshot({path: app.artifact("trimkv-gates-installed.png")});
    expect(errors).toEqual([]);
});

it("offers the gates' trained budget (memory_size in their config.json) when TRIM-KV is chosen, and sets it in one click", async () => {
    const {page, chat, errors} = await app.open({viewport: {width: 1400, height: 900}});
    await chat.byId("engine-state").filter({hasText: /ready/i}).waitFor({timeout: 60_000});
    await chat.newConversation();
    await chat.byId("memory-button").click();
    await chat.byId("budget-controller").waitFor();
    await expect.poll(() => chat.byId("policy-select").locator("option[value=trimkv]").isDisabled(), {timeout: 15_000}).toBe(false);
    // A new conversation on a model with gates starts under TRIM-KV at their trained budget (firstMinuteCompression): nothing to offer.
    await expect.poll(() => chat.byId("policy-select").inputValue(), {timeout: 15_000}).toBe("trimkv");
    expect(await chat.byId("budget-value").inputValue()).toBe("384");
    expect(await chat.byId("trained-budget").count()).toBe(0);
    // Another policy at another budget, then TRIM-KV again: its trained budget is offered, with where it comes from.
    await chat.byId("policy-select").selectOption("lethe");
    await chat.byId("budget-value").fill("2048");
    await page.waitForTimeout(600);
    expect(await chat.byId("trained-budget").count()).toBe(0);
    await chat.byId("policy-select").selectOption("trimkv");
    await expect
        .poll(() => chat.byId("trained-budget").textContent(), {timeout: 15_000})
        .toMatch(
            /These TRIM-KV gates were trained with 384 cells: memory_size in the config\.json of the authors' released gates\.\s*Use 384 cells/
        );
    await chat.byId("use-trained-budget").click();
    expect(await chat.byId("budget-kind").inputValue()).toBe("cells");
    expect(await chat.byId("budget-value").inputValue()).toBe("384");
    await expect.poll(() => chat.byId("trained-budget").count()).toBe(0);
    await page.screenshot({path: app.artifact("trimkv-trained-budget.png")});
    expect(errors).toEqual([]);
});
