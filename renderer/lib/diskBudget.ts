// The saved states' disk budget as people type and read it: binary units (MiB, GiB) as the app writes memory.

const mibPerGib = 1024;
/** The largest budget the settings accept: 1 TiB. */
const maxDiskBudgetMib = 1024 * 1024;

export type DiskBudgetParse = {ok: true; mib: number} | {ok: false; message: string};

/**
 * `"4 GiB"`, `"1.5 GiB"`, `"512 MiB"`, `"4"` (GiB when no unit is given), `"0"` (save no state) to whole MiB; anything
 * else, or more than 1 TiB, is a sentence saying what to enter.
 */
export function parseDiskBudget(text: string): DiskBudgetParse {
    const match = /^\s*(\d+(?:\.\d+)?|\.\d+)\s*(gib|gb|g|mib|mb|m)?\s*$/i.exec(text);
    if (match == null) return {ok: false, message: "Enter the disk budget in GiB or MiB, for example 4 GiB or 512 MiB (0 saves no state)."};
    const value = Number(match[1]);
    const unit = (match[2] ?? "gib").toLowerCase();
    const mib = Math.round(unit.startsWith("g") ? value * mibPerGib : value);
    if (mib === 0 && value > 0) return {ok: false, message: "A disk budget is at least 1 MiB, or 0 to save no state."};
    if (mib > maxDiskBudgetMib) return {ok: false, message: "The disk budget is at most 1024 GiB."};
    return {ok: true, mib};
}

/** `4096` -> `"4 GiB"`, `1536` -> `"1.5 GiB"`, `512` -> `"512 MiB"`, `0` -> `"0 MiB"`. */
export function formatDiskBudget(mib: number): string {
    if (mib >= mibPerGib) return `${Number((mib / mibPerGib).toFixed(2))} GiB`;
    return `${mib} MiB`;
}
