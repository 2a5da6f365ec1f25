import fs from "node:fs/promises";
import path from "node:path";
import zlib from "node:zlib";
import unzipper, {type CentralDirectory, type CentralDirectoryEntry} from "unzipper";
import {CheckpointError} from "./CheckpointError.js";
import {type StorageRef, type TensorRef, type TorchDtype, unpickleStateDict} from "./unpickleStateDict.js";

/** One tensor of a state_dict, converted to F32, row-major (contiguous) in `shape`. */
export type TorchTensor = {dtype: TorchDtype; shape: number[]; data: Float32Array};

/** Bounds against a hostile or damaged file; the authors' largest checkpoint (Qwen3-14B, BF16) is about 210 MB. */
export type ReadTorchLimits = {
    /** Bytes of `data.pkl`. Defaults to `64 MiB`. */
    pickleBytes?: number;
    /** Bytes of all storages read together. Defaults to `2 GiB`. */
    storageBytes?: number;
    /** Elements of all storages, and of all tensors, made together (4 bytes each in F32). Defaults to `2^29`. */
    elements?: number;
    /** Entries in the zip archive (a checkpoint of gates has a few per layer). Defaults to `100000`. */
    entries?: number;
};

const elementBytes: Record<TorchDtype, number> = {F32: 4, BF16: 2, F16: 2};

/**
 * Reads the tensors of a `torch.save` file (a zip archive: `<name>/data.pkl`, pickle protocol 2, and raw little-endian
 * storages at `<name>/data/<key>`) without executing anything (unpickleStateDict). Every entry's size is checked against
 * the limits and the file before it is read, its bytes against its CRC-32, each storage's length against its element
 * count, and each tensor's offset, size and stride against its storage. F32, BF16 and F16 become Float32Array.
 * Throws CheckpointError with the reason.
 */
export async function readTorchStateDict(filePath: string, limits: ReadTorchLimits = {}): Promise<Map<string, TorchTensor>> {
    const maxPickle = limits.pickleBytes ?? 64 * 1024 * 1024;
    const maxStorage = limits.storageBytes ?? 2 * 1024 * 1024 * 1024;
    const maxElements = limits.elements ?? 2 ** 29;
    const name = path.basename(filePath);
    const stat = await fs.stat(filePath).catch(() => null);
    if (stat == null) throw new CheckpointError(`${filePath} does not exist`);
    if (!stat.isFile()) throw new CheckpointError(`${filePath} is not a file`);

    await checkZipDirectory(filePath, name, stat.size, limits.entries ?? 100_000);
    let directory: CentralDirectory;
    try {
        directory = await unzipper.Open.file(filePath);
    } catch (err) {
        throw new CheckpointError(
            `${name} is not a PyTorch checkpoint: not a whole zip archive (${(err as Error).message}); ` +
                "a download cut short, or another kind of file"
        );
    }
    const entries = new Map<string, CentralDirectoryEntry>();
    for (const entry of directory.files) {
        if (entries.has(entry.path)) throw new CheckpointError(`${name}: the archive holds ${entry.path} twice`);
        entries.set(entry.path, entry);
    }
    const pickles = [...entries.keys()].filter((entryPath) => /^[^/]+\/data\.pkl$/.test(entryPath));
    if (pickles.length !== 1)
        throw new CheckpointError(
            `${name} is not a PyTorch checkpoint: ${pickles.length === 0 ? "no" : pickles.length} <name>/data.pkl in the archive`
        );
    const prefix = pickles[0]!.slice(0, -"data.pkl".length);

    const read = async (entryPath: string, expected: number | null, limit: number): Promise<Buffer> => {
        const entry = entries.get(entryPath);
        if (entry == null) throw new CheckpointError(`${name}: the archive has no ${entryPath}`);
        return readEntry(name, entry, stat.size, expected, limit);
    };

    const byteorder = entries.has(`${prefix}byteorder`) ? (await read(`${prefix}byteorder`, null, 16)).toString("latin1") : "little";
    if (byteorder !== "little") throw new CheckpointError(`${name} was saved ${byteorder}-endian; only little-endian checkpoints are read`);

    const refs = unpickleStateDict(await read(pickles[0]!, null, maxPickle));

    const storages = new Map<string, Float32Array>();
    let storageBytes = 0;
    let storageElements = 0;
    for (const ref of new Map([...refs.values()].map((tensor) => [tensor.storage.key, tensor.storage])).values()) {
        const bytes = ref.numel * elementBytes[ref.dtype];
        storageBytes += bytes;
        storageElements += ref.numel;
        if (storageBytes > maxStorage || storageElements > maxElements)
            throw new CheckpointError(`${name}: its storages hold more than ${maxStorage} bytes or ${maxElements} elements`);
        storages.set(ref.key, decodeStorage(ref, await read(`${prefix}data/${ref.key}`, bytes, maxStorage)));
    }

    const tensors = new Map<string, TorchTensor>();
    let elements = 0;
    for (const [key, ref] of refs) {
        const count = checkView(name, key, ref);
        elements += count;
        if (elements > maxElements) throw new CheckpointError(`${name}: its tensors hold more than ${maxElements} elements`);
        tensors.set(key, {dtype: ref.storage.dtype, shape: ref.size, data: gather(storages.get(ref.storage.key)!, ref, count)});
    }
    return tensors;
}

/** Bytes at the file's end in which the zip reader looks for the end-of-central-directory record (unzipper's `tailSize`). */
const zipTailBytes = 80;

/**
 * Checks the archive's end-of-central-directory record, and its zip64 record when there is one (torch writes one),
 * before the zip reader sees them: the reader makes one slot per entry the record claims before reading any, so a
 * hostile count would exhaust memory. Where both records give a count, size or offset, they must agree (the zip reader
 * believes the plain record, another reader the zip64 one); the entry count must be within the limit and the central
 * directory inside the file.
 */
async function checkZipDirectory(filePath: string, name: string, fileSize: number, maxEntries: number): Promise<void> {
    const notZip = (why: string): never => {
        throw new CheckpointError(
            `${name} is not a PyTorch checkpoint: not a whole zip archive (${why}); a download cut short, or another kind of file`
        );
    };
    const handle = await fs.open(filePath, "r");
    try {
        const read = async (position: number, length: number): Promise<Buffer> => {
            if (position < 0 || position + length > fileSize) notZip("a record lies outside the file");
            const buffer = Buffer.alloc(length);
            const {bytesRead} = await handle.read(buffer, 0, length, position);
            if (bytesRead !== length) notZip("the file ended early");
            return buffer;
        };
        const tailStart = Math.max(0, fileSize - zipTailBytes);
        const tail = await read(tailStart, fileSize - tailStart);
        const at = tail.indexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
        if (at < 0 || at + 22 > tail.length) notZip("no end-of-central-directory record");
        const eocd = tailStart + at;
        // [what, the plain record's value, the value that defers to the zip64 record, the zip64 record's offset]
        const fields = [
            ["entries", tail.readUInt16LE(at + 10), 0xffff, 32],
            ["central directory bytes", tail.readUInt32LE(at + 12), 0xffffffff, 40],
            ["central directory offset", tail.readUInt32LE(at + 16), 0xffffffff, 48]
        ] as const;
        let [entries, directorySize, directoryOffset] = fields.map(([, value]) => value as number) as [number, number, number];
        const locator = eocd >= 20 ? await read(eocd - 20, 20) : null;
        const zip64 = locator?.readUInt32LE(0) === 0x07064b50;
        if (!zip64 && (tail.readUInt16LE(at + 4) === 0xffff || fields.some(([, value, deferred]) => value === deferred)))
            notZip("no zip64 end-of-central-directory locator");
        if (zip64) {
            const recordAt = Number(locator!.readBigUInt64LE(8));
            if (!Number.isSafeInteger(recordAt) || recordAt + 56 > eocd - 20) notZip("the zip64 record lies outside the file");
            const record = await read(recordAt, 56);
            if (record.readUInt32LE(0) !== 0x06064b50) notZip("no zip64 end-of-central-directory record");
            const big = (offset: number) => {
                const value = record.readBigUInt64LE(offset);
                return value > BigInt(Number.MAX_SAFE_INTEGER) ? Infinity : Number(value);
            };
            const wide = fields.map(([, , , offset]) => big(offset)) as [number, number, number];
            for (const [i, [what, value, deferred, offset]] of fields.entries()) {
                if (value !== deferred && value !== wide[i])
                    throw new CheckpointError(
                        `${name} is not a PyTorch checkpoint: its zip64 end record says ${record.readBigUInt64LE(offset)} ${what} ` +
                            `where its end-of-central-directory record says ${value}; a damaged or crafted file`
                    );
            }
            [entries, directorySize, directoryOffset] = wide;
        }
        if (entries > maxEntries)
            throw new CheckpointError(`${name}: the archive claims ${entries} entries, more than the ${maxEntries} read`);
        if (directoryOffset + directorySize > eocd || directorySize < 46 * entries)
            notZip("its central directory does not fit in the file");
    } finally {
        await handle.close();
    }
}

/** An entry's bytes, after its sizes are checked against the limit and the file, and its bytes against its size and CRC-32. */
async function readEntry(
    name: string,
    entry: CentralDirectoryEntry,
    fileSize: number,
    expected: number | null,
    limit: number
): Promise<Buffer> {
    const what = `${name}: ${entry.path}`;
    if ((entry.flags & 1) !== 0) throw new CheckpointError(`${what} is encrypted`);
    if (entry.compressionMethod !== 0 && entry.compressionMethod !== 8)
        throw new CheckpointError(
            `${what} uses zip compression method ${entry.compressionMethod} (only stored and deflated entries are read)`
        );
    const size = entry.uncompressedSize;
    if (!Number.isSafeInteger(size) || size > limit) throw new CheckpointError(`${what} is ${size} bytes, more than the ${limit} read`);
    if (expected != null && size !== expected)
        throw new CheckpointError(`${what} is ${size} bytes; its tensors' storage needs ${expected}`);
    if (
        !Number.isSafeInteger(entry.compressedSize) ||
        entry.offsetToLocalFileHeader + entry.compressedSize > fileSize ||
        (entry.compressionMethod === 0 && entry.compressedSize !== size)
    )
        throw new CheckpointError(`${what} claims more bytes than the file holds (a download cut short?)`);

    const chunks: Buffer[] = [];
    let total = 0;
    try {
        for await (const chunk of entry.stream()) {
            total += (chunk as Buffer).length;
            if (total > size) throw new CheckpointError(`${what} holds more bytes than its directory says`);
            chunks.push(chunk as Buffer);
        }
    } catch (err) {
        if (err instanceof CheckpointError) throw err;
        throw new CheckpointError(`${what} cannot be read (${(err as Error).message})`);
    }
    const data = Buffer.concat(chunks, total);
    if (total !== size)
        throw new CheckpointError(`${what} holds ${total} bytes, not the ${size} its directory says (a download cut short?)`);
    if (zlib.crc32(data) !== entry.crc32 >>> 0) throw new CheckpointError(`${what} is damaged (its CRC-32 does not match)`);
    return data;
}

let halfTable: Float32Array | null = null;

/** A storage's elements as F32: F32 copied, BF16 as the high half of an F32, F16 through a table of all 65536 values. */
function decodeStorage(ref: StorageRef, bytes: Buffer): Float32Array {
    const out = new Float32Array(ref.numel);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (ref.dtype === "F32") {
        for (let i = 0; i < ref.numel; i++) out[i] = view.getFloat32(4 * i, true);
    } else if (ref.dtype === "BF16") {
        const bits = new Uint32Array(out.buffer);
        for (let i = 0; i < ref.numel; i++) bits[i] = (view.getUint16(2 * i, true) << 16) >>> 0;
    } else {
        halfTable ??= makeHalfTable();
        for (let i = 0; i < ref.numel; i++) out[i] = halfTable[view.getUint16(2 * i, true)]!;
    }
    return out;
}

function makeHalfTable(): Float32Array {
    const table = new Float32Array(65536);
    for (let h = 0; h < 65536; h++) {
        const sign = (h & 0x8000) !== 0 ? -1 : 1;
        const exponent = (h >> 10) & 0x1f;
        const fraction = h & 0x3ff;
        if (exponent === 0) table[h] = sign * fraction * 2 ** -24;
        else if (exponent === 31) table[h] = fraction !== 0 ? NaN : sign * Infinity;
        else table[h] = sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
    }
    return table;
}

/** The tensor's element count, after checking that every element it views lies inside its storage. */
function checkView(name: string, key: string, ref: TensorRef): number {
    let count = 1;
    let last = ref.offset;
    for (let i = 0; i < ref.size.length; i++) {
        count *= ref.size[i]!;
        last += Math.max(0, ref.size[i]! - 1) * ref.stride[i]!;
    }
    if (!Number.isSafeInteger(count) || !Number.isSafeInteger(last)) throw new CheckpointError(`${name}: tensor ${key} is too large`);
    if (count > 0 && last >= ref.storage.numel)
        throw new CheckpointError(
            `${name}: tensor ${key} (size [${ref.size.join(", ")}], stride [${ref.stride.join(", ")}], offset ${ref.offset}) ` +
                `reads past its storage of ${ref.storage.numel} elements`
        );
    return count;
}

/** The tensor's elements in row-major order. */
function gather(storage: Float32Array, ref: TensorRef, count: number): Float32Array {
    const dims = ref.size.length;
    let contiguous = true;
    for (let i = dims - 1, expected = 1; i >= 0; expected *= ref.size[i]!, i--) {
        if (ref.size[i]! > 1 && ref.stride[i] !== expected) contiguous = false;
    }
    if (contiguous && ref.offset === 0 && count === storage.length) return storage; // the whole storage, as torch.save writes each parameter: no copy
    if (contiguous) return storage.slice(ref.offset, ref.offset + count);
    const out = new Float32Array(count);
    const index = new Array<number>(dims).fill(0);
    for (let n = 0; n < count; n++) {
        let at = ref.offset;
        for (let i = 0; i < dims; i++) at += index[i]! * ref.stride[i]!;
        out[n] = storage[at]!;
        for (let i = dims - 1; i >= 0; i--) {
            if (++index[i]! < ref.size[i]!) break;
            index[i] = 0;
        }
    }
    return out;
}
