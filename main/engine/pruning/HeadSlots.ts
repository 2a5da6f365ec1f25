/**
 * Per-head cells on llama.cpp's shared cells. llama.cpp frees a cell from every layer and head at once, so each (layer,
 * KV head) keeps the same number of cells: after a round every head's kept tokens are moved into one common set of
 * cells (the slots), and the cells outside it are freed for all heads together. A slot is named by the position its
 * llama.cpp cell was written at; once heads have moved, a slot holds a different token in each head, which this table
 * records (the native read-outs name slots, a policy ranks tokens).
 *
 * The plan fills holes: the slots kept are those most heads already keep their own token in, and only a head's kept
 * tokens outside them move, each into a slot whose token that head drops. Every kept slot lies in the past, so one
 * causal mask still serves every head.
 */
export type HeadSlotPlan = {
    /** `[layer, head, from slot, to slot]` quadruples, for `NativeKv.moveHeadCells` (all at once). */
    moves: Int32Array;
    /** The slots to free afterwards, for every head (`NativeKv.evict`), ascending. */
    free: Int32Array;
};

/** Every token of a round's heads once, ascending (`seen`), and each one's index among them by token (`at`; -1: none). */
export type TokenIndex = {seen: Int32Array; at: Int32Array};

/**
 * Indexes the tokens a round's heads hold (`HeadSlots.tokensHeld`): one pass and one by-token array (typed, not a map:
 * a round looks up every (layer, head, cell)), shared by the plan and the round's tallies.
 */
export function indexTokens(tokens: ArrayLike<number>): TokenIndex {
    let top = 0;
    for (let i = 0; i < tokens.length; i++) top = Math.max(top, tokens[i]!);
    const at = new Int32Array(top + 1).fill(-1);
    for (let i = 0; i < tokens.length; i++) at[tokens[i]!] = 0;
    let count = 0;
    for (let token = 0; token <= top; token++) if (at[token] === 0) at[token] = count++;
    const seen = new Int32Array(count);
    for (let token = 0; token <= top; token++) if (at[token]! >= 0) seen[at[token]!] = token;
    return {seen, at};
}

export class HeadSlots {
    /** Per slot whose heads hold other tokens than its own: the token of each `layer * heads + head`. */
    private readonly _moved = new Map<number, Int32Array>();
    /** No moved slot lies above this one (a bound: `forgetFrom`, run before every decode, returns at once above it). */
    private _top = -1;

    constructor(
        readonly layers: number,
        readonly heads: number
    ) {
        if (!Number.isInteger(layers) || layers < 1 || !Number.isInteger(heads) || heads < 1)
            throw new RangeError(`per-head cells need whole, positive layer and head counts, got ${layers} x ${heads}`);
    }

    /** The token (its position) that `layer`'s KV head `head` holds in `slot`. */
    tokenAt(slot: number, layer: number, head: number): number {
        return this._moved.get(slot)?.[layer * this.heads + head] ?? slot;
    }

    /** Slots whose heads do not all hold the slot's own token. */
    get movedSlots(): number {
        return this._moved.size;
    }

    /** The tokens of `layer`'s head `head` in the given slots, in their order: what a read-out's cells hold for that head. */
    tokensOf(slots: ArrayLike<number>, layer: number, head: number): Int32Array {
        return Int32Array.from(slots, (slot) => this.tokenAt(slot, layer, head));
    }

    /**
     * The tokens every head holds in the given slots: `(layer * heads + head) * slots.length + i` for `slots[i]` (what
     * `tokenAt` says), with one lookup per slot.
     */
    tokensHeld(slots: ArrayLike<number>): Int32Array {
        const n = slots.length;
        const pairs = this.layers * this.heads;
        const out = new Int32Array(pairs * n);
        for (let i = 0; i < n; i++) {
            const slot = slots[i]!;
            const row = this._moved.get(slot);
            if (row == null) for (let pair = 0; pair < pairs; pair++) out[pair * n + i] = slot;
            else for (let pair = 0; pair < pairs; pair++) out[pair * n + i] = row[pair]!;
        }
        return out;
    }

    /**
     * How to leave every head with exactly its `keep(layer, head)` tokens (the same count for all, each a token that head
     * holds in one of `slots`), in `keep`'s count of slots. `pinned` slots stay whatever heads keep in them (llama.cpp's
     * first and newest cells may not be freed). `held`, when the caller already has them, are `tokensHeld` over
     * the ascending `slots` (`(layer * heads + head) * n + i`) and, optionally, their `indexTokens`. Throws when the
     * counts differ or a head keeps a token it does not hold.
     */
    plan(
        slots: ArrayLike<number>,
        keep: (layer: number, head: number) => ArrayLike<number>,
        pinned: Iterable<number> = [],
        held?: {tokens: Int32Array; index?: TokenIndex}
    ): HeadSlotPlan {
        const live = Int32Array.from(slots).sort();
        if (held != null && held.tokens.length !== this.layers * this.heads * live.length)
            throw new RangeError(`the held tokens number ${held.tokens.length}, not ${this.layers} x ${this.heads} x ${live.length}`);
        const where = new Map<number, number>();
        live.forEach((slot, index) => where.set(slot, index));
        const pairs = this.layers * this.heads;
        const n = live.length;
        const tokensHeld = held?.tokens ?? this.tokensHeld(live);
        // each pair's cell of a token, by the token's index (a round runs once per pair: typed arrays, not maps); -1: not held
        const {at, seen} = held?.index ?? indexTokens(tokensHeld);
        const top = at.length - 1;
        const cellOf = new Int32Array(seen.length).fill(-1);
        const kept: Uint8Array[] = [];
        const keptBy = new Int32Array(n);
        let count = -1;
        for (let layer = 0; layer < this.layers; layer++)
            for (let head = 0; head < this.heads; head++) {
                const tokens = keep(layer, head);
                if (count < 0) count = tokens.length;
                if (tokens.length !== count)
                    throw new RangeError(
                        `every head keeps the same number of cells: ${tokens.length} in layer ${layer} head ${head}, ${count} before`
                    );
                const base = (layer * this.heads + head) * n;
                for (let index = 0; index < n; index++) cellOf[at[tokensHeld[base + index]!]!] = index;
                const mask = new Uint8Array(n);
                let marked = 0;
                for (let i = 0; i < tokens.length; i++) {
                    const token = tokens[i]!;
                    const index = Number.isInteger(token) && token >= 0 && token <= top && at[token]! >= 0 ? cellOf[at[token]!]! : -1;
                    if (index < 0) throw new RangeError(`layer ${layer} head ${head} keeps token ${token}, which it does not hold`);
                    if (mask[index] === 0) {
                        keptBy[index]!++;
                        marked++;
                    }
                    mask[index] = 1;
                }
                for (let index = 0; index < n; index++) cellOf[at[tokensHeld[base + index]!]!] = -1;
                if (marked !== count) throw new RangeError(`layer ${layer} head ${head} keeps a token twice`);
                kept.push(mask);
            }

        // the slots kept: pinned first, then those most heads keep their own token in (the older first on a tie)
        const pinnedIndex = new Set<number>();
        for (const slot of pinned) {
            const index = where.get(slot);
            if (index != null) pinnedIndex.add(index);
        }
        if (pinnedIndex.size > count) throw new RangeError(`${pinnedIndex.size} pinned slots do not fit in ${count} kept cells`);
        const order = Array.from(live.keys()).sort(
            (a, b) => Number(pinnedIndex.has(b)) - Number(pinnedIndex.has(a)) || keptBy[b]! - keptBy[a]! || a - b
        );
        const inSet = new Uint8Array(live.length);
        for (const index of order.slice(0, count)) inSet[index] = 1;

        const moves: number[] = [];
        for (let pair = 0; pair < pairs; pair++) {
            const mask = kept[pair]!;
            const holes: number[] = [];
            const outside: number[] = [];
            for (let index = 0; index < live.length; index++) {
                if (inSet[index] === 1 && mask[index] === 0) holes.push(index);
                if (inSet[index] === 0 && mask[index] === 1) outside.push(index);
            }
            for (let i = 0; i < outside.length; i++)
                moves.push(Math.floor(pair / this.heads), pair % this.heads, live[outside[i]!]!, live[holes[i]!]!);
        }
        return {moves: Int32Array.from(moves), free: live.filter((_, index) => inSet[index] === 0)};
    }

    /** Records a plan the engine carried out: the moves made, then the freed slots gone. */
    apply(plan: HeadSlotPlan): void {
        const {moves, free} = plan;
        const read = (slot: number, pair: number) => this._moved.get(slot)?.[pair] ?? slot;
        const sources = Array.from({length: moves.length / 4}, (_, i) =>
            read(moves[4 * i + 2]!, moves[4 * i]! * this.heads + moves[4 * i + 1]!)
        );
        for (let i = 0; i < sources.length; i++) {
            const to = moves[4 * i + 3]!;
            let row = this._moved.get(to);
            if (row == null) {
                row = new Int32Array(this.layers * this.heads).fill(to);
                this._moved.set(to, row);
                this._top = Math.max(this._top, to);
            }
            row[moves[4 * i]! * this.heads + moves[4 * i + 1]!] = sources[i]!;
        }
        for (const slot of free) this._moved.delete(slot);
        for (const [slot, row] of this._moved) if (row.every((token) => token === slot)) this._moved.delete(slot);
    }

    /** Forgets slots no longer live (the sequence was cut back, or a state restored). */
    forget(slots: Iterable<number>): void {
        for (const slot of slots) this._moved.delete(slot);
    }

    /**
     * Forgets every slot at `position` or after: the positions a decode is about to write (again, after the sequence was
     * cut back), which hold their own token in every head.
     */
    forgetFrom(position: number): void {
        if (position > this._top) return;
        for (const slot of this._moved.keys()) if (slot >= position) this._moved.delete(slot);
        this._top = position - 1;
    }

    /** What a saved state keeps of the table: the moved slots and their heads' tokens, in `restore`'s form. */
    save(): {slots: Int32Array; tokens: Int32Array} {
        const slots = Int32Array.from(this._moved.keys());
        const tokens = new Int32Array(slots.length * this.layers * this.heads);
        slots.forEach((slot, i) => tokens.set(this._moved.get(slot)!, i * this.layers * this.heads));
        return {slots, tokens};
    }

    /**
     * Takes back a `save()` of a table of the same shape (a restored state's cells hold what they held then). Throws when
     * the model has not this table's `modelHeads` KV heads, or the saved table is not one `save()` could have written.
     */
    restore(saved: {slots: Int32Array; tokens: Int32Array}, modelHeads = this.heads): void {
        if (modelHeads !== this.heads)
            throw new RangeError(`the saved per-head cells are for ${this.heads} KV heads, and this model has ${modelHeads}`);
        const width = this.layers * this.heads;
        if (saved.tokens.length !== saved.slots.length * width)
            throw new RangeError(
                `a saved per-head table of ${saved.tokens.length} tokens does not fit ${saved.slots.length} slots x ${width} heads`
            );
        const whole = (value: number) => Number.isInteger(value) && value >= 0;
        if (!saved.slots.every(whole) || new Set(saved.slots).size !== saved.slots.length || !saved.tokens.every(whole))
            throw new RangeError("a saved per-head table names a slot twice or a slot or token that is not a position");
        this._moved.clear();
        saved.slots.forEach((slot, i) => this._moved.set(slot, saved.tokens.slice(i * width, (i + 1) * width)));
        this._top = saved.slots.reduce((top, slot) => Math.max(top, slot), -1);
    }
}

/**
 * A sequence's per-head table for `layers` x `heads`: `existing` when it has that shape, else a new one. Throws when
 * `existing` is of another shape and records moved heads (a state restored from a file of another model): those cells'
 * contents are not what a new table would say.
 */
export function tableOfShape(existing: HeadSlots | undefined, layers: number, heads: number): HeadSlots {
    if (existing != null && existing.layers === layers && existing.heads === heads) return existing;
    if (existing != null && existing.movedSlots > 0)
        throw new Error(
            `per-head cells: the sequence's heads were moved as ${existing.layers} layers x ${existing.heads} KV heads, not ${layers} x ${heads}`
        );
    return new HeadSlots(layers, heads);
}
