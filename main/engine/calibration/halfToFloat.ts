let table: Float32Array | null = null;

/** The value of IEEE 754 half-precision bits (as the engine stores captured rows), from a table of all 65,536. */
export function halfToFloat(bits: number): number {
    table ??= buildTable();
    return table[bits & 0xffff]!;
}

function buildTable(): Float32Array {
    const out = new Float32Array(65536);
    for (let bits = 0; bits < 65536; bits++) {
        const sign = bits & 0x8000 ? -1 : 1;
        const exponent = (bits >> 10) & 0x1f;
        const fraction = bits & 0x3ff;
        if (exponent === 0) out[bits] = sign * fraction * 2 ** -24;
        else if (exponent === 31) out[bits] = fraction === 0 ? sign * Infinity : NaN;
        else out[bits] = sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
    }
    return out;
}
