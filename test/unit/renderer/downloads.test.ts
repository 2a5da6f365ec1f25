import {describe, expect, test} from "vitest";
import type {DownloadStatus, ModelInfo} from "../../../preload/contract.js";
import {checkModelUri, createDownloads, downloadPercent} from "../../../renderer/state/downloads.svelte.js";
import {createModels} from "../../../renderer/state/models.svelte.js";
import {describeGatesDownload} from "../../../renderer/lib/describeGatesDownload.js";
import {createFakeBridge} from "./fakeBridge.js";

const uri = "hf:bartowski/QwQ-32B-GGUF:Q4_K_M";
const status = (overrides: Partial<DownloadStatus> = {}): DownloadStatus => ({
    downloadId: "d1",
    uri,
    state: "downloading",
    downloadedBytes: 0,
    totalBytes: 1000,
    error: null,
    model: null,
    ...overrides
});
const model: ModelInfo = {
    id: "m9",
    path: "/models/QwQ-32B-Q4_K_M.gguf",
    name: "QwQ-32B-Q4_K_M",
    sizeBytes: 1000,
    architecture: "qwen2",
    contextLength: 32768,
    addedAt: 0,
    lastUsedAt: null,
    crashedAt: null
};

function setup() {
    const bridge = createFakeBridge();
    const models = createModels(bridge.api);
    const downloads = createDownloads(bridge.api, models);
    bridge.handle("models:download", ({uri: wanted}) => ({ok: true, value: status({uri: wanted})}));
    return {bridge, models, downloads};
}

describe("downloads state", () => {
    test("URIs are checked before anything is sent", async () => {
        expect(checkModelUri("hf:user/repo:Q4_K_M")).toBeNull();
        expect(checkModelUri("hf:user/repo")).toBeNull();
        expect(checkModelUri("hf:user/repo/model-Q8_0.gguf")).toBeNull();
        expect(checkModelUri("https://example.com/m.gguf")).toBeNull();
        expect(checkModelUri("hf:just-a-name")).toBe("A Hugging Face URI looks like hf:user/repo:Q4_K_M");
        expect(checkModelUri("ftp://example.com/m.gguf")).toBe("Only http(s) URLs and hf: URIs can be downloaded");
        expect(checkModelUri("  ")).toMatch(/^Enter a Hugging Face URI/);

        const {bridge, downloads} = setup();
        downloads.state.uri = "not a uri";
        expect(await downloads.start()).toBe(false);
        expect(downloads.state.error).toMatch(/^Enter a Hugging Face URI/);
        expect(bridge.calls).toEqual([]);
    });

    test("progress follows models:download events; a finished download adds its model", async () => {
        const {bridge, models, downloads} = setup();
        downloads.state.uri = `  ${uri} `;
        expect(await downloads.start()).toBe(true);
        expect(bridge.calls).toEqual([{channel: "models:download", payload: {uri}}]);
        expect(downloads.state.uri).toBe("");
        expect(downloads.active).toBe(true);

        bridge.emit("models:download", status({downloadedBytes: 420}));
        expect(downloadPercent(downloads.state.items[0]!)).toBe(42);
        bridge.emit("models:download", status({state: "done", downloadedBytes: 1000, model}));
        expect(downloads.state.items[0]?.state).toBe("done");
        expect(downloadPercent(downloads.state.items[0]!)).toBe(100);
        expect(models.state.models.map((entry) => entry.id)).toEqual(["m9"]);
        expect(downloads.active).toBe(false);
    });

    test("progress never goes back when events and the response cross", async () => {
        const {bridge, downloads} = setup();
        bridge.handle("models:download", () => {
            bridge.emit("models:download", status({downloadedBytes: 500}));
            return {ok: true, value: status({downloadedBytes: 0})};
        });
        await downloads.start(uri);
        expect(downloads.state.items).toHaveLength(1);
        expect(downloads.state.items[0]?.downloadedBytes).toBe(500);
    });

    test("cancel stops it; late progress is ignored; resume starts the same URI again", async () => {
        const {bridge, downloads} = setup();
        await downloads.start(uri);
        bridge.emit("models:download", status({downloadedBytes: 300}));
        bridge.reply("models:cancelDownload", undefined);
        expect(await downloads.cancel("d1")).toBe(true);
        expect(bridge.calls.at(-1)).toEqual({channel: "models:cancelDownload", payload: {downloadId: "d1"}});
        expect(downloads.state.items[0]?.state).toBe("cancelled");
        bridge.emit("models:download", status({downloadedBytes: 310}));
        expect(downloads.state.items[0]).toMatchObject({state: "cancelled", downloadedBytes: 300});

        bridge.handle("models:download", ({uri: wanted}) => ({
            ok: true,
            value: status({downloadId: "d2", uri: wanted, downloadedBytes: 300})
        }));
        expect(await downloads.resume("d1")).toBe(true);
        expect(bridge.calls.at(-1)).toEqual({channel: "models:download", payload: {uri}});
        // The resumed download replaces the cancelled one.
        expect(downloads.state.items.map((item) => [item.downloadId, item.state])).toEqual([["d2", "downloading"]]);
        expect(downloadPercent(downloads.state.items[0]!)).toBe(30);
    });

    test("failures are readable; a size not known yet has no percent", async () => {
        const {bridge, downloads} = setup();
        bridge.fail("models:download", "BUSY", "This model is already being downloaded");
        expect(await downloads.start(uri)).toBe(false);
        expect(downloads.state.error).toBe("Could not start the download: This model is already being downloaded");
        expect(downloadPercent(status({totalBytes: 0}))).toBeNull();
        bridge.emit("models:download", status({state: "error", error: "Download failed: ECONNRESET"}));
        expect(downloads.state.items[0]?.error).toBe("Download failed: ECONNRESET");
    });

    test("refresh picks up downloads already running", async () => {
        const {bridge, downloads} = setup();
        bridge.reply("models:downloads", [
            status({downloadId: "d0", state: "error", error: "fetch failed"}),
            status({downloadId: "d1", downloadedBytes: 250}),
            status({downloadId: "d2", uri: "https://example.com/m.gguf", state: "done", downloadedBytes: 1000})
        ]);
        await downloads.refresh();
        // The failed attempt was replaced by the later one of the same URI.
        expect(downloads.state.items.map((item) => item.downloadId)).toEqual(["d2", "d1"]);
        expect(downloadPercent(downloads.state.items[1]!)).toBe(25);
    });

    test("released TRIM-KV gates: started for a model, resumed as gates, and once installed the model's details are read again", async () => {
        const {bridge, models, downloads} = setup();
        const repo = "ngocbh/TrimKV-Qwen3-1.7B-Math";
        const gates = status({downloadId: "g1", uri: `https://huggingface.co/${repo}`, gates: {modelId: "m9", repo, converted: null}});
        bridge.handle("models:getTrimkvGates", () => ({ok: true, value: gates}));
        bridge.handle("models:details", () => ({ok: false, error: {code: "NOT_FOUND", message: "gone"}}));
        expect(await downloads.startGates("m9", repo)).toBe(true);
        expect(bridge.calls).toEqual([{channel: "models:getTrimkvGates", payload: {id: "m9", repo}}]);
        expect(downloads.gatesOf("m9")?.downloadId).toBe("g1");
        expect(downloads.gatesOf("m1")).toBeNull();
        bridge.emit("models:download", {...gates, downloadedBytes: 500});
        expect(describeGatesDownload(downloads.gatesOf("m9")!)).toMatch(/^Downloading from ngocbh\/TrimKV-Qwen3-1\.7B-Math: 50% · /);

        bridge.emit("models:download", {...gates, state: "cancelled", downloadedBytes: 500});
        expect(describeGatesDownload(downloads.gatesOf("m9")!)).toBe("Cancelled at 50%: get the gates again to resume.");
        bridge.handle("models:getTrimkvGates", () => ({ok: true, value: {...gates, downloadId: "g2", downloadedBytes: 500}}));
        expect(await downloads.resume("g1")).toBe(true);
        expect(downloads.state.items.map((item) => item.downloadId)).toEqual(["g2"]);
        expect(bridge.calls.at(-1)).toEqual({channel: "models:getTrimkvGates", payload: {id: "m9", repo}});

        const converted = {layers: 28, hidden: 512, budget: 512, baseModel: "Qwen/Qwen3-1.7B", source: "converted from trimkv_weights.pth"};
        bridge.emit("models:download", {
            ...gates,
            downloadId: "g2",
            state: "done",
            downloadedBytes: 1000,
            gates: {modelId: "m9", repo, converted}
        });
        expect(bridge.calls.at(-1)).toEqual({channel: "models:details", payload: {id: "m9"}});
        expect(models.state.models).toEqual([]);
        expect(describeGatesDownload(downloads.gatesOf("m9")!)).toBe(
            "✓ Installed the gates from ngocbh/TrimKV-Qwen3-1.7B-Math: 28 layers (hidden 512), " +
                "trained with 512 cells on Qwen/Qwen3-1.7B. TRIM-KV is offered for this model from now on."
        );

        bridge.handle("models:getTrimkvGates", () => ({
            ok: false,
            error: {code: "BAD_REQUEST", message: "someone/else is not one of the TRIM-KV gates the authors released"}
        }));
        expect(await downloads.startGates("m9", "someone/else")).toBe(false);
        expect(downloads.state.gatesError).toEqual({
            modelId: "m9",
            text: expect.stringMatching(/Could not start the download of the TRIM-KV gates.*someone\/else is not one of/) as string
        });
        expect(
            describeGatesDownload({...gates, state: "error", error: "Cannot download x: config.json: the server answered 404 Not Found"})
        ).toBe("Not installed: Cannot download x: config.json: the server answered 404 Not Found");
    });
});
