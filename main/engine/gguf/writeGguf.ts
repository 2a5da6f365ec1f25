// A minimal GGUF v3 writer (little-endian), enough to produce small models that llama.cpp loads.
//
// Layout: header (magic, version, tensor count, KV count), metadata key/values, tensor infos, padding to the
// alignment, then the tensor data, each tensor starting at a multiple of the alignment.
// Reference: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md

import {writeFile} from "node:fs/promises";

const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
const GGUF_VERSION = 3;
const GGUF_DEFAULT_ALIGNMENT = 32;

export enum GgufValueType {
    UINT8 = 0,
    INT8 = 1,
    UINT16 = 2,
    INT16 = 3,
    UINT32 = 4,
    INT32 = 5,
    FLOAT32 = 6,
    BOOL = 7,
    STRING = 8,
    ARRAY = 9,
    UINT64 = 10,
    INT64 = 11,
    FLOAT64 = 12
}

/** ggml tensor types this writer can encode. */
export enum GgmlType {
    F32 = 0,
    F16 = 1
}

export type GgufScalarType = Exclude<GgufValueType, GgufValueType.ARRAY>;

export type GgufValue =
    | {type: GgufValueType.UINT8 | GgufValueType.INT8 | GgufValueType.UINT16 | GgufValueType.INT16; value: number}
    | {type: GgufValueType.UINT32 | GgufValueType.INT32 | GgufValueType.FLOAT32 | GgufValueType.FLOAT64; value: number}
    | {type: GgufValueType.UINT64 | GgufValueType.INT64; value: number | bigint}
    | {type: GgufValueType.BOOL; value: boolean}
    | {type: GgufValueType.STRING; value: string}
    | {type: GgufValueType.ARRAY; itemType: GgufScalarType; value: ReadonlyArray<number | bigint | boolean | string>};

/** Constructors for typed metadata values. */
export const gguf = {
    u8: (value: number): GgufValue => ({type: GgufValueType.UINT8, value}),
    i8: (value: number): GgufValue => ({type: GgufValueType.INT8, value}),
    u16: (value: number): GgufValue => ({type: GgufValueType.UINT16, value}),
    i16: (value: number): GgufValue => ({type: GgufValueType.INT16, value}),
    u32: (value: number): GgufValue => ({type: GgufValueType.UINT32, value}),
    i32: (value: number): GgufValue => ({type: GgufValueType.INT32, value}),
    u64: (value: number | bigint): GgufValue => ({type: GgufValueType.UINT64, value}),
    i64: (value: number | bigint): GgufValue => ({type: GgufValueType.INT64, value}),
    f32: (value: number): GgufValue => ({type: GgufValueType.FLOAT32, value}),
    f64: (value: number): GgufValue => ({type: GgufValueType.FLOAT64, value}),
    bool: (value: boolean): GgufValue => ({type: GgufValueType.BOOL, value}),
    string: (value: string): GgufValue => ({type: GgufValueType.STRING, value}),
    array: (itemType: GgufScalarType, value: ReadonlyArray<number | bigint | boolean | string>): GgufValue => ({
        type: GgufValueType.ARRAY,
        itemType,
        value
    }),
    strings: (value: readonly string[]): GgufValue => ({type: GgufValueType.ARRAY, itemType: GgufValueType.STRING, value}),
    i32s: (value: readonly number[]): GgufValue => ({type: GgufValueType.ARRAY, itemType: GgufValueType.INT32, value}),
    u32s: (value: readonly number[]): GgufValue => ({type: GgufValueType.ARRAY, itemType: GgufValueType.UINT32, value}),
    f32s: (value: readonly number[]): GgufValue => ({type: GgufValueType.ARRAY, itemType: GgufValueType.FLOAT32, value})
};

export type GgufTensor = {
    name: string;
    /** ggml `ne`, innermost (contiguous) dimension first: a matmul weight is [inputWidth, outputWidth]. */
    dims: readonly number[];
    type: GgmlType;
    /** Row-major data with dims[0] fastest; converted to `type` when written. */
    data: Float32Array;
};

export type GgufFile = {
    /** Key/value metadata in write order. `general.alignment` is added when missing, unless `alignmentKey` is false. */
    metadata: ReadonlyArray<readonly [key: string, value: GgufValue]>;
    tensors: readonly GgufTensor[];
    /** Whether to write `general.alignment` when the metadata lacks it (gguf-py's writer does not). Defaults to `true`. */
    alignmentKey?: boolean;
};

// ---------------------------------------------------------------------------------------------------------------
// float32 -> float16 (IEEE 754 binary16), round to nearest, ties to even; handles subnormals, overflow to
// infinity and NaN.

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

export function float32ToFloat16Bits(value: number): number {
    f32Scratch[0] = value;
    const x = u32Scratch[0]!;
    const sign = (x >>> 16) & 0x8000;
    const exponent = (x >>> 23) & 0xff;
    let mantissa = x & 0x7fffff;

    if (exponent === 0xff)
        // Inf or NaN (keep NaN quiet and non-zero)
        return sign | 0x7c00 | (mantissa !== 0 ? 0x200 | (mantissa >>> 13) : 0);

    const halfExponent = exponent - 127 + 15;
    if (halfExponent >= 0x1f)
        // too large: infinity
        return sign | 0x7c00;

    if (halfExponent <= 0) {
        // subnormal half (or zero)
        if (halfExponent < -10) return sign; // underflows to (signed) zero, even after rounding
        mantissa |= 0x800000; // implicit leading bit
        const shift = 14 - halfExponent; // 14..24
        let halfMantissa = mantissa >>> shift;
        const remainder = mantissa & ((1 << shift) - 1);
        const halfway = 1 << (shift - 1);
        if (remainder > halfway || (remainder === halfway && (halfMantissa & 1) !== 0)) halfMantissa++; // may carry into the smallest normal exponent, which is the correct encoding
        return sign | halfMantissa;
    }

    let half = sign | (halfExponent << 10) | (mantissa >>> 13);
    const remainder = mantissa & 0x1fff;
    if (remainder > 0x1000 || (remainder === 0x1000 && (half & 1) !== 0)) half++; // a carry into the exponent is correct, up to and including infinity
    return half;
}

export function float16BitsToFloat32(bits: number): number {
    const sign = (bits & 0x8000) !== 0 ? -1 : 1;
    const exponent = (bits >>> 10) & 0x1f;
    const mantissa = bits & 0x3ff;
    if (exponent === 0) return sign * mantissa * 2 ** -24;
    if (exponent === 0x1f) return mantissa === 0 ? sign * Infinity : NaN;
    return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

// ---------------------------------------------------------------------------------------------------------------

class ByteWriter {
    private buffer: Buffer;
    private length = 0;

    public constructor(initialSize = 1 << 16) {
        this.buffer = Buffer.alloc(initialSize);
    }

    public get offset() {
        return this.length;
    }

    private ensure(extra: number) {
        if (this.length + extra <= this.buffer.length) return;
        let size = this.buffer.length * 2;
        while (size < this.length + extra) size *= 2;
        const next = Buffer.alloc(size);
        this.buffer.copy(next, 0, 0, this.length);
        this.buffer = next;
    }

    public u8(value: number) {
        this.ensure(1);
        this.buffer.writeUInt8(value, this.length);
        this.length += 1;
    }
    public i8(value: number) {
        this.ensure(1);
        this.buffer.writeInt8(value, this.length);
        this.length += 1;
    }
    public u16(value: number) {
        this.ensure(2);
        this.buffer.writeUInt16LE(value, this.length);
        this.length += 2;
    }
    public i16(value: number) {
        this.ensure(2);
        this.buffer.writeInt16LE(value, this.length);
        this.length += 2;
    }
    public u32(value: number) {
        this.ensure(4);
        this.buffer.writeUInt32LE(value, this.length);
        this.length += 4;
    }
    public i32(value: number) {
        this.ensure(4);
        this.buffer.writeInt32LE(value, this.length);
        this.length += 4;
    }
    public u64(value: number | bigint) {
        this.ensure(8);
        this.buffer.writeBigUInt64LE(BigInt(value), this.length);
        this.length += 8;
    }
    public i64(value: number | bigint) {
        this.ensure(8);
        this.buffer.writeBigInt64LE(BigInt(value), this.length);
        this.length += 8;
    }
    public f32(value: number) {
        this.ensure(4);
        this.buffer.writeFloatLE(value, this.length);
        this.length += 4;
    }
    public f64(value: number) {
        this.ensure(8);
        this.buffer.writeDoubleLE(value, this.length);
        this.length += 8;
    }

    public bytes(data: Uint8Array) {
        this.ensure(data.length);
        this.buffer.set(data, this.length);
        this.length += data.length;
    }

    public string(value: string) {
        const data = Buffer.from(value, "utf8");
        this.u64(data.length);
        this.bytes(data);
    }

    public padTo(alignment: number) {
        const padding = (alignment - (this.length % alignment)) % alignment;
        this.ensure(padding);
        this.buffer.fill(0, this.length, this.length + padding);
        this.length += padding;
    }

    public result() {
        return this.buffer.subarray(0, this.length);
    }
}

function writeScalar(writer: ByteWriter, type: GgufScalarType, value: number | bigint | boolean | string) {
    const expect = (kind: string) => {
        if (typeof value !== kind && !(kind === "number" && typeof value === "bigint"))
            throw new TypeError(`GGUF value ${String(value)} is not a ${kind} (type ${GgufValueType[type]})`);
    };
    switch (type) {
        case GgufValueType.UINT8:
            expect("number");
            writer.u8(Number(value));
            break;
        case GgufValueType.INT8:
            expect("number");
            writer.i8(Number(value));
            break;
        case GgufValueType.UINT16:
            expect("number");
            writer.u16(Number(value));
            break;
        case GgufValueType.INT16:
            expect("number");
            writer.i16(Number(value));
            break;
        case GgufValueType.UINT32:
            expect("number");
            writer.u32(Number(value));
            break;
        case GgufValueType.INT32:
            expect("number");
            writer.i32(Number(value));
            break;
        case GgufValueType.FLOAT32:
            expect("number");
            writer.f32(Number(value));
            break;
        case GgufValueType.FLOAT64:
            expect("number");
            writer.f64(Number(value));
            break;
        case GgufValueType.UINT64:
            expect("number");
            writer.u64(value as number | bigint);
            break;
        case GgufValueType.INT64:
            expect("number");
            writer.i64(value as number | bigint);
            break;
        case GgufValueType.BOOL:
            expect("boolean");
            writer.u8(value ? 1 : 0);
            break;
        case GgufValueType.STRING:
            expect("string");
            writer.string(value as string);
            break;
        default:
            throw new TypeError(`Unsupported GGUF scalar type ${String(type)}`);
    }
}

function writeValue(writer: ByteWriter, value: GgufValue) {
    writer.u32(value.type);
    if (value.type === GgufValueType.ARRAY) {
        writer.u32(value.itemType);
        writer.u64(value.value.length);
        for (const item of value.value) writeScalar(writer, value.itemType, item);
    } else writeScalar(writer, value.type, value.value);
}

function tensorByteSize(tensor: GgufTensor) {
    const count = tensor.dims.reduce((a, b) => a * b, 1);
    if (count !== tensor.data.length)
        throw new Error(`Tensor ${tensor.name}: dims [${tensor.dims.join(", ")}] need ${count} values, got ${tensor.data.length}`);
    if (tensor.type === GgmlType.F32) return count * 4;
    if (tensor.type === GgmlType.F16) return count * 2;
    throw new Error(`Tensor ${tensor.name}: unsupported ggml type ${String(tensor.type)}`);
}

function encodeTensorData(tensor: GgufTensor): Uint8Array {
    if (tensor.type === GgmlType.F32) {
        const out = new Float32Array(tensor.data); // copy: guarantees a little-endian-native, aligned buffer
        return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
    }
    const out = new Uint16Array(tensor.data.length);
    for (let i = 0; i < tensor.data.length; i++) out[i] = float32ToFloat16Bits(tensor.data[i]!);
    return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}

/** Serializes a GGUF v3 file into a Buffer. */
export function encodeGguf(file: GgufFile): Buffer {
    if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) throw new Error("encodeGguf assumes a little-endian host");

    const metadata = [...file.metadata];
    let alignment = GGUF_DEFAULT_ALIGNMENT;
    const alignmentEntry = metadata.find(([key]) => key === "general.alignment");
    if (alignmentEntry == null && file.alignmentKey !== false) metadata.unshift(["general.alignment", gguf.u32(alignment)]);
    else if (alignmentEntry != null) {
        if (alignmentEntry[1].type !== GgufValueType.UINT32) throw new Error("general.alignment must be a uint32");
        alignment = alignmentEntry[1].value;
        if (alignment <= 0 || alignment % 8 !== 0) throw new Error("general.alignment must be a positive multiple of 8");
    }
    const keys = new Set<string>();
    for (const [key] of metadata) {
        if (keys.has(key)) throw new Error(`Duplicate GGUF metadata key: ${key}`);
        keys.add(key);
    }
    const names = new Set<string>();
    for (const tensor of file.tensors) {
        if (names.has(tensor.name)) throw new Error(`Duplicate tensor name: ${tensor.name}`);
        if (Buffer.byteLength(tensor.name) >= 64) throw new Error(`Tensor name too long for GGML_MAX_NAME: ${tensor.name}`);
        names.add(tensor.name);
    }

    const writer = new ByteWriter();
    writer.u32(GGUF_MAGIC);
    writer.u32(GGUF_VERSION);
    writer.u64(file.tensors.length);
    writer.u64(metadata.length);
    for (const [key, value] of metadata) {
        writer.string(key);
        writeValue(writer, value);
    }

    let dataOffset = 0;
    const offsets: number[] = [];
    for (const tensor of file.tensors) {
        offsets.push(dataOffset);
        writer.string(tensor.name);
        writer.u32(tensor.dims.length);
        for (const dim of tensor.dims) writer.u64(dim);
        writer.u32(tensor.type);
        writer.u64(dataOffset);
        const size = tensorByteSize(tensor);
        dataOffset += size + ((alignment - (size % alignment)) % alignment);
    }

    writer.padTo(alignment);
    const dataStart = writer.offset;
    file.tensors.forEach((tensor, i) => {
        if (writer.offset - dataStart !== offsets[i]) throw new Error("internal error: tensor offset mismatch");
        writer.bytes(encodeTensorData(tensor));
        writer.padTo(alignment);
    });
    return writer.result();
}

/** Writes a GGUF v3 file (not atomically); returns its size in bytes. */
export async function writeGguf(path: string, file: GgufFile): Promise<number> {
    const data = encodeGguf(file);
    await writeFile(path, data);
    return data.length;
}
