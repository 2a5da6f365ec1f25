/** ggml's tensor alignment in a CPU buffer (`TENSOR_ALIGNMENT`, ggml-impl.h). */
const alignment = 32;

type Block = {offset: number; size: number};

const aligned = (bytes: number) => Math.ceil(bytes / alignment) * alignment;

/**
 * A replay of ggml's graph allocator (ggml-alloc.c, `ggml_gallocr` over one `ggml_dyn_tallocr` chunk) on a graph
 * given as a sequence of tensors: each is allocated when its node runs, a node that may run in place takes a source's
 * memory when that source has no other consumer left, and a tensor is freed after its last consumer. The
 * allocator's best fit (the last, growing block only when no other fits) and its merging of freed neighbours are
 * kept, so the peak includes the fragmentation llama.cpp's compute buffer has.
 */
export class GraphAllocator {
    private readonly _blocks: Block[] = [{offset: 0, size: Number.MAX_SAFE_INTEGER}];
    private readonly _tensors = new Map<number, {offset: number; size: number; uses: number}>();
    private _next = 0;
    private _peak = 0;

    /** The buffer size the graph needs: the highest end of any allocation so far. */
    get peak(): number {
        return this._peak;
    }

    /** Allocates a graph input (the allocator places them before the nodes run); it is freed after its `uses` consumers. */
    input(size: number, uses: number): number {
        return this._allocate(size, uses);
    }

    /**
     * Runs a node reading `sources` and producing a tensor of `size` bytes read by `uses` later nodes (`Infinity` for a
     * graph output, never freed). With `inPlace` (ggml_op_can_inplace: add, mul, rms_norm, rope, soft_max, ...) it
     * reuses the memory of the first source, in order, whose last consumer it is and whose size matches. A source that
     * the node reads through a view (a reshape, a permute) is never reused: ggml-alloc.c counts a view as not its own
     * (`ggml_gallocr_is_own`), so pass such a node without `inPlace`. Returns the new tensor, or `null` for a node whose
     * result lives outside the buffer (a write into the KV cache).
     */
    run(sources: number[], output: {size: number; uses: number; inPlace?: boolean} | null): number | null {
        let id: number | null = null;
        if (output != null) {
            const size = aligned(output.size);
            const reusable = (source: number) => this._tensors.get(source)?.uses === 1 && this._tensors.get(source)!.size === size;
            const reused = output.inPlace === true ? sources.findIndex(reusable) : -1;
            if (reused !== -1) {
                const parent = this._tensors.get(sources[reused]!)!;
                id = this._next++;
                this._tensors.set(id, {offset: parent.offset, size: parent.size, uses: output.uses});
                this._tensors.delete(sources[reused]!);
                sources = sources.filter((_, i) => i !== reused);
            } else id = this._allocate(size, output.uses);
        }
        for (const source of sources) {
            const tensor = this._tensors.get(source);
            if (tensor == null) continue;
            tensor.uses--;
            if (tensor.uses === 0) {
                this._free(tensor.offset, tensor.size);
                this._tensors.delete(source);
            }
        }
        return id;
    }

    private _allocate(bytes: number, uses: number): number {
        const size = aligned(bytes);
        // The best fitting block besides the last; the last one (which grows the buffer) only when none fits.
        let best = -1;
        for (let i = 0; i < this._blocks.length - 1; i++) {
            if (this._blocks[i]!.size >= size && (best === -1 || this._blocks[i]!.size <= this._blocks[best]!.size)) best = i;
        }
        if (best === -1) best = this._blocks.length - 1;
        const block = this._blocks[best]!;
        const offset = block.offset;
        block.offset += size;
        block.size -= size;
        if (block.size === 0) this._blocks.splice(best, 1);
        this._peak = Math.max(this._peak, offset + size);
        const id = this._next++;
        this._tensors.set(id, {offset, size, uses});
        return id;
    }

    private _free(offset: number, size: number): void {
        for (let i = 0; i < this._blocks.length; i++) {
            const block = this._blocks[i]!;
            if (block.offset + block.size === offset) {
                block.size += size;
                const next = this._blocks[i + 1];
                if (next != null && block.offset + block.size === next.offset) {
                    block.size += next.size;
                    this._blocks.splice(i + 1, 1);
                }
                return;
            }
            if (offset + size === block.offset) {
                block.offset = offset;
                block.size += size;
                const previous = this._blocks[i - 1];
                if (previous != null && previous.offset + previous.size === block.offset) {
                    previous.size += block.size;
                    this._blocks.splice(i, 1);
                }
                return;
            }
        }
        let at = 0;
        while (at < this._blocks.length && this._blocks[at]!.offset < offset) at++;
        this._blocks.splice(at, 0, {offset, size});
    }
}
