// The pickle machine that reads a torch.save'd state_dict: the opcodes torch writes for a dict of tensors give the tensors'
// views; every other opcode or global, a hostile size and a malformed stream are refused with their names.
import {describe, expect, test} from "vitest";
import {unpickleStateDict} from "../../../main/engine/retention/trimkvCheckpoint/unpickleStateDict.js";

/** A small pickle writer, protocol 2, writing the opcodes as torch.save does. */
class Pickle {
    private readonly bytes: number[] = [0x80, 2];

    op(...bytes: number[]): this {
        for (const byte of bytes) this.bytes.push(byte);
        return this;
    }

    repeat(byte: number, count: number): this {
        for (let i = 0; i < count; i++) this.bytes.push(byte);
        return this;
    }

    global(module: string, name: string): this {
        return this.op(0x63, ...Buffer.from(`${module}\n${name}\n`, "latin1"));
    }

    str(text: string): this {
        const data = Buffer.from(text, "utf8");
        const length = Buffer.alloc(4);
        length.writeUInt32LE(data.length);
        return this.op(0x58, ...length, ...data);
    }

    int(value: number): this {
        return value >= 0 && value < 256 ? this.op(0x4b, value) : this.op(0x4a, ...new Uint8Array(new Int32Array([value]).buffer));
    }

    /** `_rebuild_tensor_v2(('storage', torch.<type>, key, 'cpu', numel), offset, size, stride, False, OrderedDict())` on the stack. */
    tensor(type: string, key: string, numel: number, offset: number, size: number[], stride: number[]): this {
        this.global("torch._utils", "_rebuild_tensor_v2").op(0x28); // MARK (arguments)
        this.op(0x28).str("storage").global("torch", type).str(key).str("cpu").int(numel).op(0x74, 0x51); // MARK ... TUPLE BINPERSID
        this.int(offset).op(0x28);
        size.forEach((n) => this.int(n));
        this.op(0x74, 0x28);
        stride.forEach((n) => this.int(n));
        this.op(0x74, 0x89).global("collections", "OrderedDict").op(0x29, 0x52); // NEWFALSE OrderedDict()
        return this.op(0x74, 0x52); // TUPLE REDUCE
    }

    /** An OrderedDict of the named tensors (each `[type, key, numel, offset, size, stride]`), then STOP. */
    stateDict(tensors: Array<[string, Parameters<Pickle["tensor"]>]>): Uint8Array {
        this.global("collections", "OrderedDict").op(0x71, 0, 0x29, 0x52, 0x28); // BINPUT 0, EMPTY_TUPLE, REDUCE, MARK
        for (const [name, args] of tensors) this.str(name).tensor(...args);
        return this.op(0x75, 0x2e).done(); // SETITEMS STOP
    }

    done(): Uint8Array {
        return Uint8Array.from(this.bytes);
    }
}

describe("unpickleStateDict", () => {
    test("a state_dict of F32, BF16 and F16 tensors, with shared storages, strides and offsets", () => {
        const pickle = new Pickle().stateDict([
            ["a.weight", ["FloatStorage", "0", 12, 0, [4, 3], [3, 1]]],
            ["a.weight_t", ["FloatStorage", "0", 12, 0, [3, 4], [1, 3]]],
            ["b", ["BFloat16Storage", "1", 8, 2, [2], [1]]],
            ["c", ["HalfStorage", "2", 3, 0, [3], [1]]]
        ]);
        const tensors = unpickleStateDict(pickle);
        expect([...tensors.keys()]).toEqual(["a.weight", "a.weight_t", "b", "c"]);
        expect(tensors.get("a.weight_t")).toEqual({storage: {key: "0", dtype: "F32", numel: 12}, offset: 0, size: [3, 4], stride: [1, 3]});
        expect(tensors.get("a.weight")!.storage).toBe(tensors.get("a.weight_t")!.storage);
        expect(tensors.get("b")).toEqual({storage: {key: "1", dtype: "BF16", numel: 8}, offset: 2, size: [2], stride: [1]});
        expect(tensors.get("c")!.storage.dtype).toBe("F16");
    });

    test("a {'state_dict': ...} wrapper is unwrapped; a state_dict's _metadata (BUILD) is left out", () => {
        const pickle = new Pickle()
            .op(0x7d)
            .str("state_dict") // EMPTY_DICT 'state_dict'
            .global("collections", "OrderedDict")
            .op(0x29, 0x52, 0x28)
            .str("w")
            .tensor("FloatStorage", "0", 2, 0, [2], [1])
            .op(0x75) // OrderedDict, SETITEMS
            .op(0x7d)
            .str("_metadata")
            .global("collections", "OrderedDict")
            .op(0x29, 0x52)
            .op(0x73, 0x62) // {'_metadata': OrderedDict()} BUILD
            .op(0x73, 0x2e)
            .done(); // SETITEM STOP
        expect([...unpickleStateDict(pickle).keys()]).toEqual(["w"]);
    });

    test("a global outside the state_dict's few is refused by name before anything is called", () => {
        // what pickle writes for os.system("...") through __reduce__ on Linux
        const system = new Pickle().global("posix", "system").str("touch /tmp/never").op(0x85, 0x52, 0x2e).done();
        expect(() => unpickleStateDict(system)).toThrow(
            /the global posix\.system, which a state_dict of tensors does not need; it was refused and nothing was run/
        );
        expect(() => unpickleStateDict(new Pickle().global("builtins", "eval").done())).toThrow(/global builtins\.eval/);
        expect(() => unpickleStateDict(new Pickle().global("torch", "DoubleStorage").done())).toThrow(/global torch\.DoubleStorage/);
        expect(() => unpickleStateDict(new Pickle().global("torch._utils", "_rebuild_tensor_v2 ").done())).toThrow(
            /global torch\._utils\._rebuild_tensor_v2 /
        );
    });

    test("an opcode a state_dict does not need is refused by name", () => {
        // protocol 4's STACK_GLOBAL would name a global from strings on the stack
        expect(() => unpickleStateDict(new Pickle().str("os").str("system").op(0x93).done())).toThrow(
            /the opcode STACK_GLOBAL at byte \d+/
        );
        expect(() => unpickleStateDict(new Pickle().op(0x69).done())).toThrow(/the opcode INST/);
        expect(() => unpickleStateDict(new Pickle().op(0x81).done())).toThrow(/the opcode NEWOBJ/);
        expect(() => unpickleStateDict(new Pickle().op(0xff).done())).toThrow(/the opcode 0xff/);
    });

    test("calls other than OrderedDict() and tensor rebuilding are refused", () => {
        const storageCalled = new Pickle().global("torch", "FloatStorage").op(0x29, 0x52, 0x2e).done();
        expect(() => unpickleStateDict(storageCalled)).toThrow(/calls the global torch\.FloatStorage, which cannot be called/);
        const orderedFromItems = new Pickle().global("collections", "OrderedDict").op(0x5d, 0x85, 0x52, 0x2e).done();
        expect(() => unpickleStateDict(orderedFromItems)).toThrow(/builds an OrderedDict from arguments/);
    });

    test("a persistent id that is not a storage of F32, BF16 or F16, or a storage named twice differently, is refused", () => {
        const notStorage = new Pickle().op(0x28).str("module").str("x").op(0x74, 0x51, 0x2e).done();
        expect(() => unpickleStateDict(notStorage)).toThrow(/persistent object that is not \('storage'/);
        const badKey = new Pickle().stateDict([["w", ["FloatStorage", "../../etc/passwd", 2, 0, [2], [1]]]]);
        expect(() => unpickleStateDict(badKey)).toThrow(/storage whose key is not a short name/);
        const twice = new Pickle().stateDict([
            ["w", ["FloatStorage", "0", 2, 0, [2], [1]]],
            ["v", ["HalfStorage", "0", 2, 0, [2], [1]]]
        ]);
        expect(() => unpickleStateDict(twice)).toThrow(/names storage 0 twice with different types or sizes/);
    });

    test("tensors of too many dimensions, negative sizes and mismatched strides are refused", () => {
        const nine = new Pickle().stateDict([["w", ["FloatStorage", "0", 1, 0, Array(9).fill(1), Array(9).fill(1)]]]);
        expect(() => unpickleStateDict(nine)).toThrow(/tensor of 9 dimensions/);
        const negative = new Pickle().stateDict([["w", ["FloatStorage", "0", 4, 0, [-2], [1]]]]);
        expect(() => unpickleStateDict(negative)).toThrow(/a tensor's size as -2, not a non-negative integer/);
        const strides = new Pickle().stateDict([["w", ["FloatStorage", "0", 4, 0, [2, 2], [1]]]]);
        expect(() => unpickleStateDict(strides)).toThrow(/2 sizes and 1 strides/);
    });

    test("the stack, the memo and MARK nesting are bounded", () => {
        const deep = new Pickle().op(...Array(100).fill(0x28)).done();
        expect(() => unpickleStateDict(deep)).toThrow(/nests more than 64 MARKs/);
        const wide = new Pickle().op(...Array(50).fill(0x4e)).done();
        expect(() => unpickleStateDict(wide, {stack: 40})).toThrow(/holds more than 40 values at once/);
        const memo = new Pickle().op(0x4e, ...Array.from({length: 20}, (_, i) => [0x71, i]).flat()).done();
        expect(() => unpickleStateDict(memo, {memo: 10})).toThrow(/memoizes more than 10 values/);
        expect(() => unpickleStateDict(new Pickle().op(0x68, 7).done())).toThrow(/reads memo 7, which was never stored/);
        // 200,000 items appended at once (past the engine's argument limit for a spread): refused in words, not a RangeError
        const appends = new Pickle().op(0x5d, 0x28).repeat(0x4e, 200_000).op(0x65, 0x2e).done();
        expect(() => unpickleStateDict(appends)).toThrow(/holds a list, not a state_dict/);
    });

    test("a pickle cut short, or holding something other than a dict of tensors, is refused", () => {
        const whole = new Pickle().stateDict([["w", ["FloatStorage", "0", 2, 0, [2], [1]]]]);
        for (const cut of [1, 10, 40, whole.length - 1])
            expect(() => unpickleStateDict(whole.subarray(0, cut))).toThrow(
                /ends in the middle of an opcode|has a GLOBAL without a short module or name line/
            );
        const longString = new Pickle().op(0x58, 0xff, 0xff, 0xff, 0x7f).done();
        expect(() => unpickleStateDict(longString)).toThrow(/ends in the middle of an opcode/);
        expect(() => unpickleStateDict(new Pickle().op(0x5d, 0x2e).done())).toThrow(/holds a list, not a state_dict/);
        const notTensor = new Pickle().op(0x7d).str("w").int(3).op(0x73, 0x2e).done();
        expect(() => unpickleStateDict(notTensor)).toThrow(/holds "w": 3, not a state_dict/);
        expect(() => unpickleStateDict(new Pickle().op(0x30).done())).toThrow(/the opcode POP/);
        expect(() => unpickleStateDict(new Pickle().op(0x2e).done())).toThrow(/stops with 0 values on the stack/);
    });
});
