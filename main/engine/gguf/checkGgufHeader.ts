import fs from "node:fs/promises";
import path from "node:path";
import {AppError} from "../../AppError.js";

/** What the header check learnt about a GGUF file on the way through. */
export type GgufHeader = {
    version: number;
    tensorCount: number;
    kvCount: number;
    alignment: number;
    /** `general.architecture`, when present as a string. */
    architecture: string | null;
    /** Where the tensor data starts, and how many bytes the tensor infos say it holds. */
    dataOffset: number;
    dataBytes: number;
    /** The tensors' bytes without alignment padding: the weights' size as llama.cpp counts it. */
    tensorBytes: number;
    /** Of those, the repeating layers' (`blk.*`), which GPU offload moves layer by layer. */
    layerTensorBytes: number;
    /** The output layer's (`output*`), which offload moves once every repeating layer is offloaded. */
    outputTensorBytes: number;
    /** With tied embeddings (no `output.weight`), the token embeddings llama.cpp copies to the output layer; else 0. */
    tiedOutputBytes: number;
    /** Elements of every tensor: the parameter count. */
    parameterCount: number;
    /** The ggml type holding most of the repeating layers' matrix bytes (`Q4_K`, `F16`...): the quantization a person asks about. */
    weightType: string | null;
    /** With `collect`: every scalar and string value by key (arrays are left out). */
    values?: Map<string, GgufScalar>;
    /** With `collect`: every tensor's name, ggml `ne` (innermost first), type name, bytes and offset in the data section. */
    tensors?: GgufTensorInfo[];
};

export type GgufScalar = number | boolean | string;
export type GgufTensorInfo = {name: string; dims: number[]; type: string; bytes: number; /** From `dataOffset`. */ offset: number};

export type CheckGgufOptions = {
    /** Keep the scalar values and the tensor infos (`GgufHeader.values`, `.tensors`): for small files read for their contents. Defaults to `false`. */
    collect?: boolean;
    /** What the file is meant to be, for the messages ("model", "retention gate file"). Defaults to `"model"`. */
    kind?: string;
};

// GGUF value types (gguf.md) and the byte size of the fixed-size ones.
const valueTypeNames = [
    "uint8",
    "int8",
    "uint16",
    "int16",
    "uint32",
    "int32",
    "float32",
    "bool",
    "string",
    "array",
    "uint64",
    "int64",
    "float64"
];
const fixedValueSize: Record<number, number> = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8};
const STRING = 8;
const ARRAY = 9;
const UINT32 = 4;

/** ggml tensor types as `[block size, bytes per block]` (ggml.c `type_traits`); removed types are absent. */
// ggml types (ggml.h): name, block size in elements, block bytes.
const ggmlTypes: Record<number, readonly [string, number, number]> = {
    0: ["F32", 1, 4],
    1: ["F16", 1, 2],
    2: ["Q4_0", 32, 18],
    3: ["Q4_1", 32, 20],
    6: ["Q5_0", 32, 22],
    7: ["Q5_1", 32, 24],
    8: ["Q8_0", 32, 34],
    9: ["Q8_1", 32, 36],
    10: ["Q2_K", 256, 84],
    11: ["Q3_K", 256, 110],
    12: ["Q4_K", 256, 144],
    13: ["Q5_K", 256, 176],
    14: ["Q6_K", 256, 210],
    15: ["Q8_K", 256, 292],
    16: ["IQ2_XXS", 256, 66],
    17: ["IQ2_XS", 256, 74],
    18: ["IQ3_XXS", 256, 98],
    19: ["IQ1_S", 256, 50],
    20: ["IQ4_NL", 32, 18],
    21: ["IQ3_S", 256, 110],
    22: ["IQ2_S", 256, 82],
    23: ["IQ4_XS", 256, 136],
    24: ["I8", 1, 1],
    25: ["I16", 1, 2],
    26: ["I32", 1, 4],
    27: ["I64", 1, 8],
    28: ["F64", 1, 8],
    29: ["IQ1_M", 256, 56],
    30: ["BF16", 1, 2],
    34: ["TQ1_0", 256, 54],
    35: ["TQ2_0", 256, 66],
    39: ["MXFP4", 32, 17],
    40: ["NVFP4", 64, 36],
    41: ["Q1_0", 128, 18],
    42: ["Q2_0", 64, 18]
};

// Limits of llama.cpp's reader (gguf.cpp), and of the GGUF spec for keys.
const MAX_STRING_LENGTH = 2 ** 30;
const MAX_ARRAY_ELEMENTS = 2 ** 30;
const MAX_KEY_LENGTH = 65535;
const MAX_TENSOR_NAME = 63;
const MAX_DIMS = 4;
const DEFAULT_ALIGNMENT = 32;
/** The smallest a key/value pair (8-byte length, 1-byte key, type, 1-byte value) and a tensor info can be. */
const MIN_KV_BYTES = 8 + 1 + 4 + 1;
const MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8;

const WINDOW = 64 * 1024;

/**
 * Walks a GGUF file's header before any other parser sees it: magic, version, counts, every key/value and every
 * tensor info, with each length and count checked against the bytes left in the file and every type checked against
 * the known ones. It reads through one 64 KiB window and keeps nothing per entry, so a hostile header costs no more
 * memory than a good one. Throws `MODEL_INVALID` naming the first thing that is wrong.
 */
export async function checkGgufHeader(filePath: string, options: CheckGgufOptions = {}): Promise<GgufHeader> {
    const {collect = false, kind = "model"} = options;
    const name = path.basename(filePath);
    const fail = (what: string): never => {
        throw new AppError("MODEL_INVALID", `${name} is not a usable GGUF ${kind}: ${what}`);
    };
    const values = collect ? new Map<string, GgufScalar>() : undefined;
    const tensors: GgufTensorInfo[] | undefined = collect ? [] : undefined;

    let handle;
    try {
        handle = await fs.open(filePath, "r");
    } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        throw new AppError(
            "MODEL_INVALID",
            code === "ENOENT" ? `${filePath} does not exist` : `Cannot open ${filePath}: ${code ?? (err as Error).message}`,
            {cause: err}
        );
    }
    try {
        const stat = await handle.stat();
        if (!stat.isFile()) throw new AppError("MODEL_INVALID", `${filePath} is not a file`);
        const reader = new WindowReader(handle, stat.size, fail);

        if (stat.size < 4 || (await reader.bytes(4)).toString("latin1") !== "GGUF")
            throw new AppError("MODEL_INVALID", `${name} is not a GGUF ${kind} file (it does not start with the GGUF signature)`);

        const version = await reader.u32("the version");
        if (version !== 2 && version !== 3)
            fail(version === 1 ? "GGUF version 1 is no longer supported" : `unknown GGUF version ${version}`);
        const tensorCount = await reader.count("the tensor count");
        const kvCount = await reader.count("the key/value count");
        if (kvCount * MIN_KV_BYTES + tensorCount * MIN_TENSOR_INFO_BYTES > reader.remaining)
            fail(
                `the header announces ${kvCount} key/value pairs and ${tensorCount} tensors, more than the ${reader.remaining} bytes left in the file can hold`
            );

        let alignment = DEFAULT_ALIGNMENT;
        let architecture: string | null = null;
        for (let i = 0; i < kvCount; i++) {
            const key = await reader.string(`the name of key/value pair ${i}`, MAX_KEY_LENGTH, true);
            if (key.length === 0) fail(`key/value pair ${i} has an empty name`);
            const type = await reader.u32(`the type of ${key}`);
            if (key === "general.alignment") {
                if (type !== UINT32) fail(`general.alignment must be a uint32, not ${typeName(type)}`);
                alignment = await reader.u32("general.alignment");
                if (alignment === 0 || (alignment & (alignment - 1)) !== 0) fail(`general.alignment ${alignment} is not a power of 2`);
            } else if (key === "general.architecture" && type === STRING)
                architecture = await reader.string("general.architecture", 256, true);
            else if (values != null && type !== ARRAY) values.set(key, await readScalar(reader, key, type));
            else await skipValue(reader, key, type);
        }
        if (values != null && architecture != null) values.set("general.architecture", architecture);

        if (architecture == null) fail("it has no general.architecture (a string naming the model's architecture)");

        let expectedOffset = 0;
        let tensorBytes = 0;
        let layerTensorBytes = 0;
        let outputTensorBytes = 0;
        let tokenEmbeddingBytes = 0;
        let outputWeight = false;
        let parameterCount = 0;
        const matrixBytesByType = new Map<string, number>();
        for (let i = 0; i < tensorCount; i++) {
            const tensor = await reader.string(`the name of tensor ${i}`, MAX_TENSOR_NAME, true);
            const dimCount = await reader.u32(`the dimension count of ${tensor}`);
            if (dimCount > MAX_DIMS) fail(`tensor ${tensor} has ${dimCount} dimensions (at most ${MAX_DIMS})`);
            let elements = 1n;
            let firstDim = 1n;
            const dims: bigint[] = [];
            for (let d = 0; d < dimCount; d++) {
                const dim = await reader.u64(`dimension ${d} of ${tensor}`);
                dims.push(dim);
                if (dim >= 2n ** 63n) fail(`tensor ${tensor} has a negative dimension`);
                if (d === 0) firstDim = dim;
                elements *= dim;
                if (elements >= 2n ** 63n) fail(`tensor ${tensor} has more elements than fit in 64 bits`);
            }
            const type = await reader.u32(`the type of ${tensor}`);
            const traits = ggmlTypes[type];
            if (traits == null) fail(`tensor ${tensor} has unknown ggml type ${type}`);
            const [typeName, blockSize, blockBytes] = traits!;
            if (firstDim % BigInt(blockSize) !== 0n)
                fail(`tensor ${tensor} has ${firstDim} elements per row, not a multiple of its type's block size ${blockSize}`);
            const offset = await reader.u64(`the data offset of ${tensor}`);
            if (offset !== BigInt(expectedOffset)) fail(`tensor ${tensor} starts at data offset ${offset}, expected ${expectedOffset}`);
            const bytes = (elements / BigInt(blockSize)) * BigInt(blockBytes);
            const padded = ((bytes + BigInt(alignment) - 1n) / BigInt(alignment)) * BigInt(alignment);
            if (padded > BigInt(stat.size)) fail(`tensor ${tensor} (${bytes} bytes) is larger than the whole file`);
            expectedOffset += Number(padded);
            tensorBytes += Number(bytes);
            tensors?.push({name: tensor, dims: dims.map(Number), type: typeName, bytes: Number(bytes), offset: Number(offset)});
            parameterCount += Number(elements);
            if (tensor.startsWith("blk.") && dimCount >= 2)
                matrixBytesByType.set(typeName, (matrixBytesByType.get(typeName) ?? 0) + Number(bytes));
            if (tensor.startsWith("blk.")) layerTensorBytes += Number(bytes);
            else if (tensor.startsWith("output")) {
                outputTensorBytes += Number(bytes);
                outputWeight ||= tensor === "output.weight";
            } else if (tensor === "token_embd.weight") tokenEmbeddingBytes = Number(bytes);
        }
        const tiedOutputBytes = outputWeight ? 0 : tokenEmbeddingBytes;

        const dataOffset = Math.ceil(reader.position / alignment) * alignment;
        if (tensorCount > 0 && dataOffset + expectedOffset > stat.size)
            fail(`it is truncated: ${describeSizes(stat.size, dataOffset + expectedOffset)} (an incomplete download?)`);
        const weightType = [...matrixBytesByType].sort((a, b) => b[1] - a[1])[0]?.[0] ?? null;
        return {
            version,
            tensorCount,
            kvCount,
            alignment,
            architecture,
            dataOffset,
            dataBytes: expectedOffset,
            tensorBytes,
            layerTensorBytes,
            outputTensorBytes,
            tiedOutputBytes,
            parameterCount,
            weightType,
            values,
            tensors
        };
    } finally {
        await handle.close();
    }
}

async function skipValue(reader: WindowReader, key: string, type: number): Promise<void> {
    if (type === STRING) {
        await reader.string(`the value of ${key}`, MAX_STRING_LENGTH, false);
        return;
    }
    if (type === ARRAY) {
        const itemType = await reader.u32(`the item type of ${key}`);
        if (itemType === ARRAY) reader.fail(`${key} is an array of arrays, which llama.cpp cannot read`);
        if (itemType !== STRING && fixedValueSize[itemType] == null) reader.fail(`${key} is an array of unknown type ${itemType}`);
        const count = await reader.count(`the length of ${key}`);
        const itemBytes = itemType === STRING ? 8 : fixedValueSize[itemType]!;
        if (count * itemBytes > reader.remaining)
            reader.fail(`${key} announces ${count} items, more than the ${reader.remaining} bytes left in the file can hold`);
        if (count > MAX_ARRAY_ELEMENTS) reader.fail(`${key} has ${count} items, more than llama.cpp reads (${MAX_ARRAY_ELEMENTS})`);
        if (itemType !== STRING) {
            await reader.skip(count * itemBytes, `the items of ${key}`);
            return;
        }
        for (let i = 0; i < count; i++) await reader.string(`item ${i} of ${key}`, MAX_STRING_LENGTH, false);
        return;
    }
    const size = fixedValueSize[type];
    if (size == null) reader.fail(`${key} has unknown value type ${type}`);
    await reader.skip(size!, `the value of ${key}`);
}

/** A scalar or string value, as JavaScript holds it (a 64-bit integer past 2^53 loses precision). */
async function readScalar(reader: WindowReader, key: string, type: number): Promise<GgufScalar> {
    if (type === STRING) return await reader.string(`the value of ${key}`, MAX_STRING_LENGTH, true);
    const size = fixedValueSize[type];
    if (size == null) reader.fail(`${key} has unknown value type ${type}`);
    const bytes = await reader.bytes(size!, `the value of ${key}`);
    switch (type) {
        case 0:
            return bytes.readUInt8(0);
        case 1:
            return bytes.readInt8(0);
        case 2:
            return bytes.readUInt16LE(0);
        case 3:
            return bytes.readInt16LE(0);
        case 4:
            return bytes.readUInt32LE(0);
        case 5:
            return bytes.readInt32LE(0);
        case 6:
            return bytes.readFloatLE(0);
        case 7:
            return bytes.readUInt8(0) !== 0;
        case 10:
            return Number(bytes.readBigUInt64LE(0));
        case 11:
            return Number(bytes.readBigInt64LE(0));
        default:
            return bytes.readDoubleLE(0);
    }
}

function typeName(type: number): string {
    return valueTypeNames[type] ?? `type ${type}`;
}

function formatBytes(bytes: number): string {
    return bytes >= 1024 * 1024 ? (bytes / 1024 / 1024).toFixed(1) + " MiB" : `${bytes} bytes`;
}

/** "X on disk, the header describes Y", in bytes where the rounded sizes would read the same. */
export function describeSizes(onDisk: number, described: number): string {
    const [disk, header] =
        formatBytes(onDisk) === formatBytes(described)
            ? [`${onDisk.toLocaleString("en-US")} bytes`, `${described.toLocaleString("en-US")} bytes`]
            : [formatBytes(onDisk), formatBytes(described)];
    return `${disk} on disk, the header describes ${header}`;
}

/** Sequential little-endian reads through one fixed window; every read is checked against the file's end first. */
class WindowReader {
    position = 0;
    private readonly _window = Buffer.alloc(WINDOW);
    private _windowStart = 0;
    private _windowEnd = 0;

    constructor(
        private readonly _handle: fs.FileHandle,
        private readonly _size: number,
        readonly fail: (what: string) => never
    ) {}

    get remaining(): number {
        return this._size - this.position;
    }

    async u32(what: string): Promise<number> {
        return (await this.bytes(4, what)).readUInt32LE(0);
    }

    async u64(what: string): Promise<bigint> {
        return (await this.bytes(8, what)).readBigUInt64LE(0);
    }

    /** A u64 count, as a number; anything past 2^53 is refused (no file is that large). */
    async count(what: string): Promise<number> {
        const value = await this.u64(what);
        if (value > BigInt(Number.MAX_SAFE_INTEGER)) this.fail(`${what} is ${value}, far more than the file can hold`);
        return Number(value);
    }

    /** A length-prefixed string: decoded when `keep`, else skipped. */
    async string(what: string, maxLength: number, keep: true): Promise<string>;
    async string(what: string, maxLength: number, keep: false): Promise<void>;
    async string(what: string, maxLength: number, keep: boolean): Promise<string | void> {
        const length = await this.u64(`the length of ${what}`);
        if (length > BigInt(this.remaining))
            this.fail(`${what} is ${length} bytes long, but only ${this.remaining} bytes are left in the file`);
        if (length > BigInt(maxLength)) this.fail(`${what} is ${length} bytes long (at most ${maxLength})`);
        if (!keep) {
            await this.skip(Number(length), what);
            return;
        }
        return (await this.bytes(Number(length), what)).toString("utf8");
    }

    async skip(length: number, what: string): Promise<void> {
        if (length > this.remaining) this.fail(`the file ends inside ${what} (truncated)`);
        this.position += length;
    }

    /** `length` bytes at the current position; at most one window, and never past the file's end. */
    async bytes(length: number, what = "the header"): Promise<Buffer> {
        if (length > this.remaining) this.fail(`the file ends inside ${what} (truncated)`);
        if (length > WINDOW) this.fail(`${what} is longer than ${WINDOW} bytes`);
        if (this.position < this._windowStart || this.position + length > this._windowEnd) {
            const {bytesRead} = await this._handle.read(this._window, 0, Math.min(WINDOW, this._size - this.position), this.position);
            this._windowStart = this.position;
            this._windowEnd = this.position + bytesRead;
            if (bytesRead < length) this.fail(`the file ends inside ${what} (truncated)`);
        }
        const start = this.position - this._windowStart;
        this.position += length;
        return this._window.subarray(start, start + length);
    }
}
