import type {Llama} from "node-llama-cpp";
import os from "node:os";
import type {BuildInfo} from "../../../preload/contract/engine.js";
import type {RuntimeOptions} from "../EngineApi.js";
import type {SetStatus} from "./engineState.js";
import {connectRpcServers, describeRpcProblems} from "./connectRpcServers.js";
import {hasRpcDevices} from "../rpc/rpcEndpoint.js";

export type LlamaLoader = (options: RuntimeOptions) => Promise<{llama: Llama; build: BuildInfo; warning?: string}>;

/** How long `dispose()` waits for the runtime to let go. */
const runtimeDisposeMs = 3000;

/**
 * The llama.cpp runtime: loaded once, however many ask at the same time, with the rpc-servers registered before any
 * model loads; its build said in the status. `options` is the runtime the next load starts (the engine build).
 */
export class EngineRuntime {
    private _llama: Llama | null = null;
    private _build: BuildInfo | null = null;
    private _loading: Promise<{llama: Llama; build: BuildInfo}> | null = null;

    /** `owned`: whether `dispose()` disposes the runtime `load` gave (false when the caller shares it). */
    constructor(
        private readonly _load: LlamaLoader,
        public options: RuntimeOptions,
        private readonly _owned: boolean,
        private readonly _setStatus: SetStatus
    ) {}

    /** The build running; `null` before it loaded. */
    get build(): BuildInfo | null {
        return this._build;
    }

    /** Whether offloaded layers (and their KV) leave RAM on this build: a GPU build, or rpc-servers' devices. */
    get offloads(): boolean {
        return this._build != null && (this._build.gpu !== false || hasRpcDevices(this._build.rpc));
    }

    /** Loads the runtime (once, however many ask at the same time) and reports which llama.cpp build it is. */
    async load(): Promise<{llama: Llama; build: BuildInfo}> {
        if (this._llama != null && this._build != null) return {llama: this._llama, build: this._build};
        this._loading ??= (async () => {
            try {
                const loaded = await this._load(this.options);
                const {llama} = loaded;
                // The rpc-servers are registered before any model loads: llama.cpp places layers on the devices it knows then.
                const rpc = await connectRpcServers(llama, this.options.rpcServers ?? []);
                const build: BuildInfo = {...loaded.build, rpc};
                this._llama = llama;
                this._build = build;
                const message = [loaded.warning, describeRpcProblems(rpc)].filter((part) => part != null).join(" ");
                this._setStatus({build, message: message !== "" ? message : null});
                return {llama, build};
            } catch (err) {
                this._setStatus({state: "error", message: (err as Error).message});
                throw err;
            } finally {
                this._loading = null;
            }
        })();
        return this._loading;
    }

    /** Bytes free where the KV cache goes: VRAM on a build that offloads, RAM otherwise. */
    async freeMemory(): Promise<number> {
        const {llama} = await this.load();
        return this.offloads ? (await llama.getVramState()).free : os.freemem();
    }

    /** Disposes the runtime when it is owned, and forgets it either way: the next `load` loads `options` afresh. */
    async dispose(): Promise<void> {
        await this._loading?.catch(() => {});
        if (this._owned && this._llama != null) {
            // node-llama-cpp 3.22.1 keeps a dispose guard for a model whose load failed until that model is garbage
            // collected, so the runtime's dispose can wait without end after a failed load: bound the wait.
            let timer: NodeJS.Timeout | undefined;
            await Promise.race([this._llama.dispose(), new Promise((resolve) => (timer = setTimeout(resolve, runtimeDisposeMs)))]);
            clearTimeout(timer);
        }
        this._llama = null;
        this._build = null;
    }
}
