import {describe, expect, it} from "vitest";
import {unpackScores, packScores} from "../../../main/engine/states/SequenceStates.js";
import {
    checkStateHeader,
    decodeTokens,
    encodeStateFile,
    encodeTokens,
    hashSettings,
    hashTokens,
    readStateHeader,
    reviveTyped,
    StateFileError,
    tagTyped,
    verifyStatePayload,
    type StateExpectation
} from "../../../main/engine/states/stateFile.js";

const expectation: StateExpectation = {
    model: {path: "/m.gguf", size: 1000, mtimeMs: 5},
    kvType: "f16",
    kvTypeV: "f16",
    flashAttention: false,
    policy: "h2o",
    cells: 512,
    settingsHash: hashSettings({policy: "h2o", a: 1})
};
const tokens = [1, 2, 3, 70000];

function file(llama = Buffer.from("llama-state-bytes"), scores = Buffer.from([1, 2, 3, 4])): Buffer {
    return Buffer.concat(
        encodeStateFile(
            {
                kind: "prompt",
                ...expectation,
                pathHash: hashTokens(tokens),
                tokens: encodeTokens(tokens),
                tokenCount: tokens.length,
                liveCells: 3,
                bytesPerCell: 10,
                scoreLayers: 0,
                scoreHeads: 0,
                retentionLayers: 0,
                retentionHeads: 0,
                valueNormLayers: 0,
                valueNormHeads: 0,
                controller: tagTyped({state: {t: new Float64Array([1.5, 2])}})
            },
            llama,
            scores
        )
    );
}

/** The whole check a reader makes before llama.cpp sees a file: header, then the payload's checksum. */
function check(bytes: Buffer): void {
    const {header, payloadOffset} = readStateHeader(bytes, bytes.byteLength);
    verifyStatePayload(header, bytes.subarray(payloadOffset));
}

describe("state file", () => {
    it("reads back what it wrote: header, tokens, payload and typed controller state", () => {
        const bytes = file();
        const {header, payloadOffset} = readStateHeader(bytes, bytes.byteLength);
        expect(header.llamaBytes).toBe(17);
        expect(decodeTokens(header.tokens, header.tokenCount)).toEqual(tokens);
        expect(checkStateHeader(header, expectation)).toBeNull();
        expect(() => verifyStatePayload(header, bytes.subarray(payloadOffset))).not.toThrow();
        expect((reviveTyped(header.controller) as {state: {t: Float64Array}}).state.t).toEqual(new Float64Array([1.5, 2]));
    });

    it("names what differs: model, cache types, flash attention, policy, budget, settings", () => {
        const bytes = file();
        const {header} = readStateHeader(bytes, bytes.byteLength);
        expect(checkStateHeader(header, {...expectation, model: {...expectation.model, mtimeMs: 6}})).toMatch(/another model/);
        expect(checkStateHeader(header, {...expectation, kvTypeV: "q8_0"})).toMatch(/KV cache/);
        expect(checkStateHeader(header, {...expectation, flashAttention: true})).toMatch(/flash attention/);
        expect(checkStateHeader(header, {...expectation, policy: "lethe"})).toMatch(/under h2o/);
        expect(checkStateHeader(header, {...expectation, cells: 1024})).toMatch(/budget/);
        expect(checkStateHeader(header, {...expectation, settingsHash: hashSettings({policy: "h2o", a: 2})})).toMatch(/settings/);
    });

    it("hashes settings whatever the key order", () => {
        expect(hashSettings({a: 1, b: {c: 2, d: 3}})).toBe(hashSettings({b: {d: 3, c: 2}, a: 1}));
    });

    it("refuses a file truncated at every 1/16 and one with any byte flipped", () => {
        const bytes = file(Buffer.alloc(4000, 7), Buffer.alloc(800, 3));
        for (let k = 0; k < 16; k++) {
            const cut = bytes.subarray(0, Math.floor((bytes.byteLength * k) / 16));
            expect(() => check(cut), `truncated at ${k}/16`).toThrow(StateFileError);
        }
        for (let i = 0; i < bytes.byteLength; i += 7) {
            const flipped = Buffer.from(bytes);
            flipped[i] = flipped[i]! ^ 0x20;
            expect(() => check(flipped), `byte ${i} flipped`).toThrow(StateFileError);
        }
        expect(() => check(Buffer.concat([bytes, Buffer.from([0])]))).toThrow(/longer/);
        expect(() => check(Buffer.from("GGUF and something else entirely, quite long enough"))).toThrow(/not a Ponder state/);
    });

    it("packs scores with their positions", () => {
        const positions = Int32Array.from([0, 5, 9]);
        const layers: [Float32Array, Float32Array][] = [[Float32Array.from([1, 2, 3, 4, 5, 6]), Float32Array.from([6, 5, 4, 3, 2, 1])]];
        const unpacked = unpackScores(packScores(positions, 2, layers), 3, 2, 1, 2);
        expect(unpacked.positions).toEqual(positions);
        expect(unpacked.layers).toEqual(layers);
        expect(() => unpackScores(packScores(positions, 2, layers), 3, 2, 2, 2)).toThrow(StateFileError);
    });

    it("carries the retention gates' logits after the scores, checked like the rest", () => {
        const positions = Int32Array.from([0, 5, 9]);
        const logits = [[Float32Array.from([1.5, -2, 3e38, 4, 5, 6])], [Float32Array.from([7, 8, 9, 10, 11, 12])]];
        const retention = packScores(positions, 2, logits);
        const bytes = Buffer.concat(
            encodeStateFile(
                {
                    kind: "prompt",
                    ...expectation,
                    pathHash: hashTokens(tokens),
                    tokens: encodeTokens(tokens),
                    tokenCount: tokens.length,
                    liveCells: 3,
                    bytesPerCell: 10,
                    scoreLayers: 0,
                    scoreHeads: 0,
                    retentionLayers: 2,
                    retentionHeads: 2,
                    valueNormLayers: 0,
                    valueNormHeads: 0,
                    controller: null
                },
                Buffer.from("llama"),
                new Uint8Array(0),
                retention
            )
        );
        const {header, payloadOffset} = readStateHeader(bytes, bytes.byteLength);
        expect(header.retentionBytes).toBe(retention.byteLength);
        const payload = bytes.subarray(payloadOffset);
        expect(() => verifyStatePayload(header, payload)).not.toThrow();
        const back = unpackScores(
            payload.subarray(header.llamaBytes + header.scoreBytes),
            3,
            header.retentionHeads,
            header.retentionLayers,
            1
        );
        expect(back.positions).toEqual(positions);
        expect(back.layers).toEqual(logits);
        expect(() => check(bytes.subarray(0, bytes.byteLength - 4))).toThrow(/truncated/);
    });

    it("carries the value norms (LAVa) after the retention gates' logits, each part where its header says", () => {
        const positions = Int32Array.from([0, 5, 9]);
        const logits = [[Float32Array.from([1, 2, 3])]];
        const norms = [[Float32Array.from([10, 20, 30, 40, 50, 60])], [Float32Array.from([7, 8, 9, 10, 11, 12])]];
        const retention = packScores(positions, 1, logits);
        const valueNorms = packScores(positions, 2, norms);
        const bytes = Buffer.concat(
            encodeStateFile(
                {
                    kind: "prompt",
                    ...expectation,
                    pathHash: hashTokens(tokens),
                    tokens: encodeTokens(tokens),
                    tokenCount: tokens.length,
                    liveCells: 3,
                    bytesPerCell: 10,
                    scoreLayers: 0,
                    scoreHeads: 0,
                    retentionLayers: 1,
                    retentionHeads: 1,
                    valueNormLayers: 2,
                    valueNormHeads: 2,
                    controller: null
                },
                Buffer.from("llama"),
                new Uint8Array(0),
                retention,
                valueNorms
            )
        );
        const {header, payloadOffset} = readStateHeader(bytes, bytes.byteLength);
        expect(header.valueNormBytes).toBe(valueNorms.byteLength);
        const payload = bytes.subarray(payloadOffset);
        expect(() => verifyStatePayload(header, payload)).not.toThrow();
        const start = header.llamaBytes + header.scoreBytes + header.retentionBytes;
        const back = unpackScores(payload.subarray(start), 3, header.valueNormHeads, header.valueNormLayers, 1);
        expect(back.positions).toEqual(positions);
        expect(back.layers).toEqual(norms);
        expect(() => check(bytes.subarray(0, bytes.byteLength - 4))).toThrow(/truncated/);
    });
});
