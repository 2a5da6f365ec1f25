import {LlamaChatSession, type LlamaContext} from "node-llama-cpp";
import os from "node:os";
import type {LayerPlacement} from "../../../preload/contract/engine.js";
import {AppError} from "../../AppError.js";
import {assertBudgetWithinCap} from "../../kv/budgetCap.js";
import {contextFit} from "../../kv/contextFit.js";
import type {ActiveContext, ContextConfig, LoadedModel, SetStatus} from "./engineState.js";
import type {EngineRuntime} from "./EngineRuntime.js";
import {cacheTypeProblem, describeKvTypes, formatMib} from "../../kv/kvMemory.js";
import {NativeKv} from "../native/NativeKv.js";
import {gateSequenceDecodes, ponderContextOf} from "../native/ponderAddon.js";

/** Positions node-llama-cpp may reach while pruning keeps the live cells within the budget. */
const prunedPositionLimit = 1 << 22;

/** node-llama-cpp's names of the cache types. */
const ggmlTypeName = {f16: "F16", q8_0: "Q8_0", q4_0: "Q4_0"} as const;

export type EngineContextOptions = {
    runtime: EngineRuntime;
    /** Threads per context; `0` lets llama.cpp decide. */
    threads: number;
    /** Bytes free where a new context goes, read before each one is created (its fit is checked against them). */
    freeMemory: () => Promise<number>;
    /** Called before the context is replaced or disposed for another: a state waiting in it is written then. */
    beforeReplace: () => Promise<unknown>;
    setStatus: SetStatus;
};

/**
 * The engine's one chat context: made for a generation's config (its budget's cells, the cache types, flash attention),
 * kept while the config stays, and refused before llama.cpp is asked when it cannot fit. The status says where its
 * layers run.
 */
export class EngineContext {
    private _active: ActiveContext | null = null;

    constructor(private readonly _options: EngineContextOptions) {}

    /** The context now; `null` before the first generation and after `dispose`. */
    get active(): ActiveContext | null {
        return this._active;
    }

    /**
     * The chat context for `config`, recreated when the budget, a KV cache type or flash attention changed, and on a GPU
     * or RPC build when the policy's read-outs (`config.reads`) changed.
     */
    async ensure(loaded: LoadedModel, config: ContextConfig, pruning: boolean): Promise<ActiveContext> {
        const current = this._active;
        if (current != null && sameConfig(current.config, config)) {
            current.kv?.setPositionLimit(pruning ? prunedPositionLimit : current.kv.originalContextSize);
            return current;
        }
        const cacheProblem = cacheTypeProblem(loaded.inspection, config);
        if (cacheProblem != null) throw new AppError("BAD_REQUEST", cacheProblem);
        await this._options.beforeReplace();
        await this.dispose();
        await this._assertFits(loaded, config);

        let context: LlamaContext;
        try {
            context = await loaded.model.createContext({
                contextSize: config.cells,
                sequences: 1,
                flashAttention: config.flashAttention,
                threads: this._options.threads,
                experimentalKvCacheKeyType: ggmlTypeName[config.kvType],
                experimentalKvCacheValueType: ggmlTypeName[config.kvTypeV]
            });
        } catch (err) {
            throw new AppError(
                "BAD_REQUEST",
                `Could not allocate a KV cache of ${config.cells} cells (${describeKvTypes(config)}): ${(err as Error).message}`,
                {cause: err}
            );
        }
        const kv = this._options.runtime.build?.patched === true ? new NativeKv(context) : null;
        if (pruning) kv?.setPositionLimit(prunedPositionLimit);
        const session = new LlamaChatSession({
            contextSequence: context.getSequence(),
            chatWrapper: loaded.chatWrapper,
            autoDisposeSequence: true
        });
        const active: ActiveContext = {context, session, kv, config, controller: null};
        // Every decode of the sequence waits for the generation's controller: its prune rounds never overlap a decode.
        if (kv != null) gateSequenceDecodes(session.sequence, (count, first) => active.controller?.beforeDecode(count, first) ?? count);
        this._active = active;
        this._options.setStatus({placement: this._placement(active)});
        return active;
    }

    /**
     * Where the loaded model's layers are, by device name ("CPU", "RPC0", …), once a context exists; `null` before, or on a
     * build without patch 0010.
     */
    layerDevices(): {layers: string[]; output: string} | null {
        const active = this._active;
        if (active == null) return null;
        return ponderContextOf(active.context)?.ponderLayerDevices?.() ?? null;
    }

    /** Disposes the context, its native KV access and its session. */
    async dispose(): Promise<void> {
        const active = this._active;
        this._active = null;
        if (active == null) return;
        await active.kv?.dispose();
        active.session.dispose({disposeSequence: true});
        await active.context.dispose();
    }

    /** Where the model's layers run, read from the context (patch 0010), with the rpc-server of each remote device. */
    private _placement(active: ActiveContext): LayerPlacement | null {
        const devices = ponderContextOf(active.context)?.ponderLayerDevices?.();
        if (devices == null) return null;
        const remote = new Map(
            (this._options.runtime.build?.rpc?.servers ?? []).flatMap((server) =>
                server.devices.map((device) => [device.name, server.endpoint] as const)
            )
        );
        const names = [...new Set([...devices.layers, devices.output])];
        return {...devices, devices: names.map((name) => ({name, where: remote.get(name) ?? null}))};
    }

    /**
     * Refuses, before llama.cpp is asked, a context the model cannot use (more cells than its context, `budgetCap`) or one
     * the fit estimate says does not fit in free memory: the KV cache and the compute buffer llama.cpp reserves with it (a
     * scoring policy's scores come when it turns scoring on). Free memory is read once the previous context is gone.
     */
    private async _assertFits(loaded: LoadedModel, config: ContextConfig): Promise<void> {
        assertBudgetWithinCap(loaded.inspection, {...config, budget: {kind: "cells", cells: config.cells}});
        const free = await this._options.freeMemory();
        const gpu = this._options.runtime.offloads ? {gpuLayers: loaded.model.gpuLayers, freeRamBytes: os.freemem()} : undefined;
        const fit = contextFit(loaded.inspection, config, free, {modelLoaded: true, gpu});
        if (fit == null || fit.fits) return;
        const room =
            fit.offload == null
                ? `${formatMib(fit.neededBytes)}, and ${formatMib(free)} is free`
                : `${formatMib(fit.offload.vramBytes)} of VRAM (${formatMib(fit.offload.freeVramBytes)} free) and ` +
                  `${formatMib(fit.offload.ramBytes)} of RAM (${formatMib(fit.offload.freeRamBytes)} free)`;
        const cells = config.cells.toLocaleString("en-US");
        throw new AppError(
            "BUDGET_DOES_NOT_FIT",
            `A KV cache of ${cells} cells (${describeKvTypes(config)}) with llama.cpp's compute buffer ` +
                `needs ${room}: choose a smaller budget or a quantized KV cache.`
        );
    }
}

function sameConfig(a: ContextConfig, b: ContextConfig): boolean {
    return (
        a.cells === b.cells &&
        a.kvType === b.kvType &&
        a.kvTypeV === b.kvTypeV &&
        a.flashAttention === b.flashAttention &&
        (a.reads ?? null) === (b.reads ?? null)
    );
}
