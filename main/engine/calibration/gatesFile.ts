import fs from "node:fs/promises";
import type {TrainedGates} from "./trainGates.js";

// The trained gates of a calibration kept in its work folder between runs, exactly (the candidate sidecar may hold F16
// matrices): a JSON line of their shape, then every layer's matrices as F32 bytes. Written atomically.

/** The trained gates as F32 bytes behind a JSON line of their shape (the candidate sidecar may hold F16 matrices). */
export async function writeGatesFile(file: string, gates: TrainedGates): Promise<void> {
    const {layers, width, hidden, kvHeads} = gates;
    const head = Buffer.from(JSON.stringify({layers, width, hidden, kvHeads}) + "\n", "utf8");
    const body = gates.gates.flatMap((g) =>
        [g.fc1, g.fc1Bias, g.fc2, g.bias].map((v) => Buffer.from(v.buffer, v.byteOffset, v.byteLength))
    );
    const temp = `${file}.tmp`;
    await fs.writeFile(temp, Buffer.concat([head, ...body]));
    await fs.rename(temp, file);
}

export async function readGatesFile(file: string): Promise<TrainedGates> {
    const bytes = await fs.readFile(file);
    const newline = bytes.indexOf(10);
    const {layers, width, hidden, kvHeads} = JSON.parse(bytes.toString("utf8", 0, newline)) as Omit<TrainedGates, "gates">;
    let at = newline + 1;
    const take = (n: number) => {
        const out = new Float32Array(bytes.buffer.slice(bytes.byteOffset + at, bytes.byteOffset + at + n * 4));
        if (out.length !== n) throw new Error(`${file} is cut short`);
        at += n * 4;
        return out;
    };
    const gates = Array.from({length: layers}, () => ({
        fc1: take(hidden * width),
        fc1Bias: take(hidden),
        fc2: take(kvHeads * hidden),
        bias: take(kvHeads)
    }));
    return {layers, width, hidden, kvHeads, gates};
}
