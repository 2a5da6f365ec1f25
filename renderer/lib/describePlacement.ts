import type {LayerPlacement} from "../../preload/contract.js";

/** One run of consecutive layers on one device, for a person: "layers 0–1", "this machine (CPU)". */
export type PlacementGroup = {layers: string; where: string};

/**
 * Where a model's layers run, as runs of consecutive layers on one device: its rpc-server's address for a remote device,
 * "this machine" with the device's name for a local one; the output layer last.
 */
export function describePlacement(placement: LayerPlacement): PlacementGroup[] {
    const whereOf = (name: string) => {
        const where = placement.devices.find((device) => device.name === name)?.where ?? null;
        return where != null ? `${where} (${name})` : `this machine (${name})`;
    };
    const groups: PlacementGroup[] = [];
    let start = 0;
    for (let index = 1; index <= placement.layers.length; index++) {
        if (index < placement.layers.length && placement.layers[index] === placement.layers[start]) continue;
        const last = index - 1;
        groups.push({layers: start === last ? `layer ${start}` : `layers ${start}–${last}`, where: whereOf(placement.layers[start]!)});
        start = index;
    }
    groups.push({layers: "output", where: whereOf(placement.output)});
    return groups;
}
