// The KV cache's units, written once: bytes in a MiB, MiB <-> cells and the cache types in words. The budget cap
// (main/kv/budgetCap.ts), the resolved KV (main/kv/resolveKv.ts), the engine's refusals and the renderer's budget form
// read them here. Pure: main, preload and renderer import it.

import type {KvCacheType} from "./contract/compression.js";

/** Bytes in one MiB. */
export const bytesPerMib = 1024 * 1024;

/** The cells a budget of `mib` MiB holds at `bytesPerCell` bytes a cell (whole cells, rounded down). */
export function cellsInMib(mib: number, bytesPerCell: number): number {
    return Math.floor((mib * bytesPerMib) / bytesPerCell);
}

/** `bytes` in MiB to two decimals, rounded down (`floor`, what a cap allows), up (`ceil`, what a floor needs) or to the nearest. */
export function mibOfBytes(bytes: number, rounding: "floor" | "ceil" | "round"): number {
    return Math[rounding]((bytes / bytesPerMib) * 100) / 100;
}

/** The cache types of a compression setting: `kvType` for the keys, `kvTypeV` for the values. */
export type KvCacheTypes = {kvType: KvCacheType; kvTypeV: KvCacheType};

/** The cache in words: "q8_0 KV" when keys and values share a type, "q8_0 K / q4_0 V" otherwise. */
export function describeKvTypes(types: KvCacheTypes): string {
    return types.kvType === types.kvTypeV ? `${types.kvType} KV` : `${types.kvType} K / ${types.kvTypeV} V`;
}
