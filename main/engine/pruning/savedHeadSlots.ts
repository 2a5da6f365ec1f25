import type {NativeKv} from "../native/NativeKv.js";

/** A sequence's per-head table as a saved state keeps it: which token each head held where, with the table's shape. */
export type SavedHeadSlots = {layers: number; heads: number; slots: Int32Array; tokens: Int32Array};

/** The sequence's per-head table for a saved state; none when no head was ever moved apart (shared cells). */
export function saveHeadSlots(kv: NativeKv, sequenceId: number): SavedHeadSlots | undefined {
    const table = kv.existingHeadSlots(sequenceId);
    return table == null ? undefined : {layers: table.layers, heads: table.heads, ...table.save()};
}

/**
 * Takes back a saved table (`saveHeadSlots`), or, when the state kept none, forgets every moved slot of the sequence.
 * Rejects a table of other layers or KV heads than the model's cache (`HeadSlots.restore`), with nothing taken back.
 */
export async function restoreHeadSlots(kv: NativeKv, sequenceId: number, saved: SavedHeadSlots | undefined): Promise<void> {
    if (saved == null) {
        kv.existingHeadSlots(sequenceId)?.forgetFrom(0);
        return;
    }
    const {layers} = await kv.stats();
    if (saved.layers !== layers)
        throw new RangeError(`the saved per-head cells are for ${saved.layers} layers, and this model's cache has ${layers}`);
    kv.headSlots(sequenceId, saved.layers, saved.heads).restore(saved, kv.kvHeads);
}
