import {CheckpointError} from "./CheckpointError.js";
import {opcodeNames, refusedNames} from "./pickleOpcodes.js";

/** The element types of the storages a state_dict may hold, by their `torch.<Name>Storage` global. */
export type TorchDtype = "F32" | "BF16" | "F16";

/** A storage named by a persistent id `('storage', torch.<Type>Storage, key, location, numel)`; its bytes are `<archive>/data/<key>`. */
export type StorageRef = {key: string; dtype: TorchDtype; numel: number};

/** A tensor as `torch._utils._rebuild_tensor_v2` describes it: a view of a storage (offset, size and stride in elements). */
export type TensorRef = {storage: StorageRef; offset: number; size: number[]; stride: number[]};

/** Bounds on what one pickle may make; a state_dict of gates is far inside them. */
export type UnpickleLimits = {
    /** Values on the stack at once. Defaults to `1 << 20`. */
    stack?: number;
    /** Memo entries. Defaults to `1 << 20`. */
    memo?: number;
    /** Nested MARKs. Defaults to `64`. */
    marks?: number;
    /** Dimensions of one tensor. Defaults to `8`. */
    dims?: number;
};

const storageTypes: Record<string, TorchDtype> = {FloatStorage: "F32", BFloat16Storage: "BF16", HalfStorage: "F16"};

/** The only globals a pickle may name: what a state_dict of F32/BF16/F16 tensors needs, nothing that runs code of its choosing. */
const allowedGlobals = new Set([
    "collections.OrderedDict",
    "torch._utils._rebuild_tensor_v2",
    "torch._utils._rebuild_parameter",
    ...Object.keys(storageTypes).map((name) => `torch.${name}`)
]);

class Global {
    constructor(readonly name: string) {}
}

class Tuple {
    constructor(readonly items: Value[]) {}
}

class Dict {
    readonly entries = new Map<string | number, Value>();
}

class Tensor {
    constructor(readonly ref: TensorRef) {}
}

class Storage {
    constructor(readonly ref: StorageRef) {}
}

type Value = null | boolean | number | string | Value[] | Tuple | Dict | Global | Tensor | Storage;

/**
 * Reads the pickle of a `torch.save`d state_dict (`<archive>/data.pkl`) without executing anything: a small pickle machine
 * that knows only the opcodes a dict of tensors needs and only the globals `collections.OrderedDict`,
 * `torch._utils._rebuild_tensor_v2`, `torch._utils._rebuild_parameter` and `torch.{Float,BFloat16,Half}Storage`. Any other
 * opcode or global is refused with its name; so are storages other than `('storage', type, key, location, numel)` and
 * every size past the limits. Returns the tensors by name (a `{"state_dict": {...}}` wrapper is unwrapped, as
 * `torch.load` users do); their bytes are read and checked by the caller.
 */
export function unpickleStateDict(pickle: Uint8Array, limits: UnpickleLimits = {}): Map<string, TensorRef> {
    const maxStack = limits.stack ?? 1 << 20;
    const maxMemo = limits.memo ?? 1 << 20;
    const maxMarks = limits.marks ?? 64;
    const maxDims = limits.dims ?? 8;
    const view = new DataView(pickle.buffer, pickle.byteOffset, pickle.byteLength);
    const decoder = new TextDecoder("utf-8", {fatal: true});
    const storages = new Map<string, StorageRef>();
    const memo = new Map<number, Value>();
    const marks: number[] = [];
    let stack: Value[] = [];
    let pos = 0;

    const fail: (message: string) => never = (message) => {
        throw new CheckpointError(`the checkpoint's pickle (data.pkl) ${message}`);
    };
    const take = (n: number): number => {
        if (n > pickle.length - pos) fail(`ends in the middle of an opcode at byte ${pos}`);
        const at = pos;
        pos += n;
        return at;
    };
    const push = (value: Value) => {
        if (stack.length >= maxStack) fail(`holds more than ${maxStack} values at once`);
        stack.push(value);
    };
    const pop = (): Value => {
        const floor = marks.length > 0 ? marks[marks.length - 1]! : 0;
        if (stack.length <= floor) fail(`pops an empty stack at byte ${pos}`);
        return stack.pop()!;
    };
    const top = (): Value => {
        const floor = marks.length > 0 ? marks[marks.length - 1]! : 0;
        if (stack.length <= floor) fail(`reads an empty stack at byte ${pos}`);
        return stack[stack.length - 1]!;
    };
    const popMark = (): Value[] => {
        const mark = marks.pop();
        if (mark == null) fail(`closes a MARK it never opened at byte ${pos}`);
        const items = stack.slice(mark);
        stack = stack.slice(0, mark);
        return items;
    };
    const text = (length: number): string => {
        const at = take(length);
        try {
            return decoder.decode(pickle.subarray(at, at + length));
        } catch {
            return fail(`has a string that is not UTF-8 at byte ${at}`);
        }
    };
    const line = (): string => {
        const end = pickle.indexOf(0x0a, pos);
        if (end < 0 || end - pos > 256) fail(`has a GLOBAL without a short module or name line at byte ${pos}`);
        const value = text(end - pos);
        pos += 1;
        return value;
    };
    const memoPut = (index: number) => {
        if (!memo.has(index) && memo.size >= maxMemo) fail(`memoizes more than ${maxMemo} values`);
        memo.set(index, top());
    };
    const memoGet = (index: number) => {
        const value = memo.get(index);
        if (value === undefined) fail(`reads memo ${index}, which was never stored`);
        push(value!);
    };
    const setItems = (dict: Value, items: Value[]) => {
        if (!(dict instanceof Dict)) fail("sets items on something other than a dict");
        if (items.length % 2 !== 0) fail("sets a key without a value");
        for (let i = 0; i < items.length; i += 2) {
            const key = items[i]!;
            if (typeof key !== "string" && typeof key !== "number")
                fail(`has a dict key that is not a string or a number (${describe(key)})`);
            (dict as Dict).entries.set(key as string | number, items[i + 1]!);
        }
    };
    const storage = (pid: Value): Storage => {
        const items = pid instanceof Tuple ? pid.items : null;
        if (items == null || items.length !== 5 || items[0] !== "storage")
            return fail(`names a persistent object that is not ('storage', type, key, location, numel): ${describe(pid)}`);
        const [, type, key, location, numel] = items;
        if (!(type instanceof Global) || storageTypes[type.name.replace(/^torch\./, "")] == null)
            return fail(
                `names a storage of type ${describe(type!)}; only torch.FloatStorage, torch.BFloat16Storage and torch.HalfStorage are read`
            );
        if (typeof key !== "string" || !/^[A-Za-z0-9_]{1,64}$/.test(key))
            return fail(`names a storage whose key is not a short name: ${describe(key!)}`);
        if (typeof location !== "string") return fail(`names storage ${key} without a location`);
        const count = integer(numel!, `storage ${key}'s element count`);
        const dtype = storageTypes[type.name.replace(/^torch\./, "")]!;
        const known = storages.get(key);
        if (known != null && (known.dtype !== dtype || known.numel !== count))
            return fail(`names storage ${key} twice with different types or sizes`);
        const ref = known ?? {key, dtype, numel: count};
        storages.set(key, ref);
        return new Storage(ref);
    };
    const integer = (value: Value, what: string): number => {
        if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0)
            return fail(`gives ${what} as ${describe(value)}, not a non-negative integer`);
        return value;
    };
    const integers = (value: Value, what: string): number[] => {
        if (!(value instanceof Tuple)) return fail(`gives ${what} as ${describe(value)}, not a tuple`);
        if (value.items.length > maxDims) return fail(`gives a tensor of ${value.items.length} dimensions (at most ${maxDims} are read)`);
        return value.items.map((item) => integer(item, what));
    };
    const reduce = (callable: Value, args: Value): Value => {
        if (!(callable instanceof Global)) return fail(`calls ${describe(callable)}, which is not a global`);
        if (!(args instanceof Tuple)) return fail(`calls ${callable.name} with arguments that are not a tuple`);
        const a = args.items;
        switch (callable.name) {
            case "collections.OrderedDict":
                if (a.length !== 0) fail("builds an OrderedDict from arguments (only an empty one is read)");
                return new Dict();
            case "torch._utils._rebuild_tensor_v2": {
                // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
                if (a.length < 6 || a.length > 7) fail(`calls torch._utils._rebuild_tensor_v2 with ${a.length} arguments`);
                if (!(a[0] instanceof Storage)) fail(`rebuilds a tensor from ${describe(a[0]!)}, not a storage`);
                const size = integers(a[2]!, "a tensor's size");
                const stride = integers(a[3]!, "a tensor's stride");
                if (size.length !== stride.length) fail(`gives a tensor ${size.length} sizes and ${stride.length} strides`);
                if (typeof a[4] !== "boolean") fail("rebuilds a tensor whose requires_grad is not a boolean");
                if (!emptyDict(a[5]!) || (a.length === 7 && a[6] !== null && !emptyDict(a[6]!)))
                    fail("rebuilds a tensor with backward hooks or metadata (only plain tensors are read)");
                return new Tensor({storage: (a[0] as Storage).ref, offset: integer(a[1]!, "a tensor's storage offset"), size, stride});
            }
            case "torch._utils._rebuild_parameter":
                // _rebuild_parameter(data, requires_grad, backward_hooks): the tensor itself
                if (a.length !== 3 || !(a[0] instanceof Tensor) || typeof a[1] !== "boolean" || !emptyDict(a[2]!))
                    fail("rebuilds a parameter from something other than (tensor, requires_grad, no hooks)");
                return a[0]!;
            default:
                return fail(`calls the global ${callable.name}, which cannot be called`);
        }
    };

    for (;;) {
        const at = take(1);
        const op = pickle[at]!;
        const name = opcodeNames[op];
        if (name == null) {
            const refused = refusedNames[op];
            fail(
                `uses the opcode ${refused ?? `0x${op.toString(16).padStart(2, "0")}`} at byte ${at}, which a state_dict of tensors does not need; nothing was run`
            );
        }
        switch (op) {
            case 0x80: {
                // PROTO
                const protocol = pickle[take(1)]!;
                if (protocol < 2 || protocol > 5) fail(`is pickle protocol ${protocol}`);
                break;
            }
            case 0x2e: {
                // STOP
                if (marks.length > 0 || stack.length !== 1)
                    fail(`stops with ${stack.length} values on the stack and ${marks.length} open MARKs`);
                return stateDict(stack[0]!, fail);
            }
            case 0x28: // MARK
                if (marks.length >= maxMarks) fail(`nests more than ${maxMarks} MARKs`);
                marks.push(stack.length);
                break;
            case 0x29:
                push(new Tuple([]));
                break; // EMPTY_TUPLE
            case 0x74:
                push(new Tuple(popMark()));
                break; // TUPLE
            case 0x85:
                push(new Tuple([pop()]));
                break; // TUPLE1
            case 0x86: {
                const b = pop();
                const a = pop();
                push(new Tuple([a, b]));
                break;
            } // TUPLE2
            case 0x87: {
                const c = pop();
                const b = pop();
                const a = pop();
                push(new Tuple([a, b, c]));
                break;
            } // TUPLE3
            case 0x5d:
                push([]);
                break; // EMPTY_LIST
            case 0x61: {
                // APPEND
                const item = pop();
                const list = top();
                if (!Array.isArray(list)) fail("appends to something other than a list");
                (list as Value[]).push(item);
                break;
            }
            case 0x65: {
                // APPENDS
                const items = popMark();
                const list = top();
                if (!Array.isArray(list)) fail("appends to something other than a list");
                for (const item of items) (list as Value[]).push(item);
                break;
            }
            case 0x7d:
                push(new Dict());
                break; // EMPTY_DICT
            case 0x73: {
                const value = pop();
                const key = pop();
                setItems(top(), [key, value]);
                break;
            } // SETITEM
            case 0x75: {
                const items = popMark();
                setItems(top(), items);
                break;
            } // SETITEMS
            case 0x4e:
                push(null);
                break; // NONE
            case 0x88:
                push(true);
                break; // NEWTRUE
            case 0x89:
                push(false);
                break; // NEWFALSE
            case 0x4b:
                push(pickle[take(1)]!);
                break; // BININT1
            case 0x4d:
                push(view.getUint16(take(2), true));
                break; // BININT2
            case 0x4a:
                push(view.getInt32(take(4), true));
                break; // BININT
            case 0x8a: {
                // LONG1: little-endian two's complement of n bytes
                const n = pickle[take(1)]!;
                if (n > 8) fail(`has an integer of ${n} bytes at byte ${at}`);
                const start = take(n);
                let value = 0n;
                for (let i = n - 1; i >= 0; i--) value = (value << 8n) | BigInt(pickle[start + i]!);
                if (n > 0 && (pickle[start + n - 1]! & 0x80) !== 0) value -= 1n << BigInt(8 * n);
                if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER))
                    fail(`has an integer beyond 2^53 at byte ${at}`);
                push(Number(value));
                break;
            }
            case 0x58:
                push(text(view.getUint32(take(4), true)));
                break; // BINUNICODE
            case 0x8c:
                push(text(pickle[take(1)]!));
                break; // SHORT_BINUNICODE
            case 0x63: {
                // GLOBAL
                const module = line();
                const global = `${module}.${line()}`;
                if (!allowedGlobals.has(global))
                    fail(`names the global ${global}, which a state_dict of tensors does not need; it was refused and nothing was run`);
                push(new Global(global));
                break;
            }
            case 0x51:
                push(storage(pop()));
                break; // BINPERSID
            case 0x71:
                memoPut(pickle[take(1)]!);
                break; // BINPUT
            case 0x72:
                memoPut(view.getUint32(take(4), true));
                break; // LONG_BINPUT
            case 0x68:
                memoGet(pickle[take(1)]!);
                break; // BINGET
            case 0x6a:
                memoGet(view.getUint32(take(4), true));
                break; // LONG_BINGET
            case 0x52: {
                const args = pop();
                const callable = pop();
                push(reduce(callable, args));
                break;
            } // REDUCE
            case 0x62: {
                // BUILD: an OrderedDict's attributes (a state_dict's `_metadata`), kept out of the result
                const state = pop();
                if (!(top() instanceof Dict) || !(state instanceof Dict))
                    fail(`sets the state of ${describe(top())} (only a state_dict's attributes are read)`);
                break;
            }
        }
    }
}

function emptyDict(value: Value): boolean {
    return value instanceof Dict && value.entries.size === 0;
}

/** The tensors by name of the pickle's result, a dict of tensors (or `{"state_dict": dict of tensors}`). */
function stateDict(result: Value, fail: (message: string) => never): Map<string, TensorRef> {
    if (!(result instanceof Dict)) return fail(`holds ${describe(result)}, not a state_dict (name -> tensor)`);
    const inner = result.entries.get("state_dict");
    const dict = inner instanceof Dict ? inner : result;
    const tensors = new Map<string, TensorRef>();
    for (const [key, value] of dict.entries) {
        if (typeof key !== "string" || !(value instanceof Tensor))
            return fail(`holds ${JSON.stringify(key)}: ${describe(value)}, not a state_dict (name -> tensor)`);
        tensors.set(key, value.ref);
    }
    return tensors;
}

function describe(value: Value): string {
    if (value === null) return "None";
    if (typeof value === "string") return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value);
    if (typeof value === "number" || typeof value === "boolean") return String(value);
    if (Array.isArray(value)) return "a list";
    if (value instanceof Tuple) return `a tuple of ${value.items.length}`;
    if (value instanceof Dict) return "a dict";
    if (value instanceof Global) return value.name;
    if (value instanceof Tensor) return "a tensor";
    return "a storage";
}
