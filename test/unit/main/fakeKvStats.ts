import type {KvStats} from "../../../main/engine/native/types.js";

/** What a NativeKv stand-in reports of its cells: 4,096 allocated, one byte each, `used` live. */
export function fakeKvStats(used: number, layers: number, scoring: boolean): KvStats {
    return {
        cellsAllocated: 1 << 12,
        cellsUsed: used,
        bytesPerCell: 1,
        bytesAllocated: 1 << 12,
        bytesUsed: used,
        layers,
        tokensEvicted: 0,
        pruneCalls: 0,
        scoring
    };
}
