import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {afterAll, describe, expect, it} from "vitest";
import {concatDatasets, readDatasetFile, writeDatasetFile} from "../../../../main/engine/calibration/datasetFile.js";
import type {CalibrationDataset} from "../../../../main/engine/calibration/types.js";

function dataset(n: number, first: number): CalibrationDataset {
    const layers = 2;
    const d = 3;
    const kv = 2;
    return {
        layers,
        embeddingLength: d,
        headCountKv: kv,
        tokens: n,
        features: Float32Array.from({length: n * layers * d}, (_, i) => first + i / 7),
        horizons: Float32Array.from({length: n * layers * kv}, (_, i) => i % 5),
        followers: Int32Array.from({length: n}, (_, i) => 100 - i),
        positions: Int32Array.from({length: n}, (_, i) => i * 2),
        text: Int32Array.from({length: n}, (_, i) => (i < n / 2 ? 0 : 1)),
        tokenIds: Int32Array.from({length: n}, (_, i) => 1000 + i),
        generated: Uint8Array.from({length: n}, (_, i) => i % 2),
        readThreshold: 0.5,
        alternatives: [{readThreshold: 0.25, horizons: Float32Array.from({length: n * layers * kv}, (_, i) => first + (i % 7))}],
        minWatched: 16,
        tokensSeen: n * 3,
        texts: [
            {prompt: 0, promptTokens: 5, generatedTokens: 20, stop: "eog", tokens: Int32Array.from({length: 25}, (_, i) => i)},
            {prompt: 1, promptTokens: 6, generatedTokens: 30, stop: "limit", tokens: Int32Array.from({length: 36}, (_, i) => 7 * i)}
        ],
        seed: 1
    };
}

const dir = await fs.mkdtemp(path.join(os.tmpdir(), "ponder-caldata-"));
afterAll(() => fs.rm(dir, {recursive: true, force: true}));

describe("calibration data files", () => {
    it("reads back what was written, bit for bit", async () => {
        const data = dataset(9, 0.25);
        const file = path.join(dir, "a.cal");
        await writeDatasetFile(file, data);
        expect(await readDatasetFile(file)).toEqual(data);
        expect((await fs.readdir(dir)).filter((name) => name.endsWith(".tmp"))).toEqual([]);
    });

    it("refuses a file cut short or not its own", async () => {
        const file = path.join(dir, "b.cal");
        await writeDatasetFile(file, dataset(4, 1));
        const bytes = await fs.readFile(file);
        await fs.writeFile(file, bytes.subarray(0, bytes.length - 3));
        await expect(readDatasetFile(file)).rejects.toThrow(/cut short/);
        await fs.writeFile(file, "hello, world");
        await expect(readDatasetFile(file)).rejects.toThrow(/not calibration data/);
    });

    it("joins runs, moving each sample's text index past the earlier runs' texts", () => {
        const joined = concatDatasets([dataset(4, 0), dataset(6, 10)]);
        expect(joined.tokens).toBe(10);
        expect(joined.features.length).toBe(10 * 2 * 3);
        expect(Array.from(joined.text)).toEqual([0, 0, 1, 1, 2, 2, 2, 3, 3, 3]);
        expect(joined.texts.map((t) => t.prompt)).toEqual([0, 1, 2, 3]);
        expect(joined.tokensSeen).toBe(30);
        expect(joined.features[4 * 6]).toBe(10);
        expect(joined.alternatives?.map((a) => a.readThreshold)).toEqual([0.25]);
        expect(Array.from(joined.alternatives![0]!.horizons)).toEqual([
            ...dataset(4, 0).alternatives![0]!.horizons,
            ...dataset(6, 10).alternatives![0]!.horizons
        ]);
        expect(() => concatDatasets([dataset(4, 0), {...dataset(6, 10), alternatives: []}])).toThrow(/read thresholds/);
    });
});
