import {expect, test} from "vitest";
import {describePlacement} from "../../../renderer/lib/describePlacement.js";

test("groups consecutive layers by device and names each remote device's rpc-server", () => {
    expect(
        describePlacement({
            layers: ["CPU", "CPU", "RPC0", "RPC0", "RPC1"],
            output: "RPC1",
            devices: [
                {name: "CPU", where: null},
                {name: "RPC0", where: "127.0.0.1:50052"},
                {name: "RPC1", where: "10.0.0.2:50052"}
            ]
        })
    ).toEqual([
        {layers: "layers 0–1", where: "this machine (CPU)"},
        {layers: "layers 2–3", where: "127.0.0.1:50052 (RPC0)"},
        {layers: "layer 4", where: "10.0.0.2:50052 (RPC1)"},
        {layers: "output", where: "10.0.0.2:50052 (RPC1)"}
    ]);
    expect(describePlacement({layers: ["CPU"], output: "CPU", devices: [{name: "CPU", where: null}]})).toEqual([
        {layers: "layer 0", where: "this machine (CPU)"},
        {layers: "output", where: "this machine (CPU)"}
    ]);
});
