import type {RpcServerCheck, RpcServerEntry, RpcServers, RpcServerState} from "../../preload/contract.js";
import {AppError} from "../AppError.js";
import type {AppDatabase} from "../db/AppDatabase.js";
import type {EngineApi, RuntimeOptions} from "../engine/EngineApi.js";
import {formatProtocol, probeRpcServer, type RpcProbe, type RpcProtocol} from "../engine/rpc/probeRpcServer.js";
import {parseRpcEndpoint, rpcExposureWarning} from "../engine/rpc/rpcEndpoint.js";
import {readEngineBuildChoice} from "./EngineBuildService.js";
import type {GenerationQueue} from "./GenerationQueue.js";
import {
    maxRpcServers as maxServers,
    readEnabledRpcServers,
    readRpcServers as readStored,
    writeRpcServers,
    type StoredRpcServer as Stored
} from "./rpcServerSettings.js";

/** The runtime the engine starts with: the engine-build setting and the enabled rpc-servers. */
export function readRuntimeOptions(db: AppDatabase): RuntimeOptions {
    return {build: readEngineBuildChoice(db), rpcServers: readEnabledRpcServers(db)};
}

export type RpcServerServiceOptions = {
    /** Defaults to `probeRpcServer` over TCP. */
    probe?: (endpoint: string, expected: RpcProtocol | null) => Promise<RpcProbe>;
};

/**
 * The rpc-servers of the engine settings (llama.cpp's RPC backend): stored in the settings table, each checked on add
 * and on demand (reachable, protocol version, devices and free memory). The enabled ones are the engine's: changing
 * which are enabled restarts the engine process with them (a process cannot drop a server it registered) and loads the
 * model again, its layers split across them by the GPU layers setting.
 */
export class RpcServerService {
    private readonly _checks = new Map<string, RpcServerCheck>();
    private readonly _probe: (endpoint: string, expected: RpcProtocol | null) => Promise<RpcProbe>;

    constructor(
        private readonly _db: AppDatabase,
        private readonly _engine: EngineApi,
        private readonly _queue: GenerationQueue,
        options: RpcServerServiceOptions = {}
    ) {
        this._probe = options.probe ?? ((endpoint, expected) => probeRpcServer(endpoint, {expected}));
    }

    get(): RpcServers {
        return {
            servers: readStored(this._db).map((server) => this._entry(server)),
            protocol: this._engine.status.build?.rpc?.protocol ?? null
        };
    }

    /** Adds a server (checked first; one that fails its check is kept, disabled, with the reason). */
    async add(endpoint: string): Promise<RpcServers> {
        const parsed = parseEndpointOrRefuse(endpoint);
        const stored = readStored(this._db);
        if (stored.some((server) => server.endpoint === parsed)) throw new AppError("BAD_REQUEST", `${parsed} is already in the list`);
        if (stored.length >= maxServers) throw new AppError("BAD_REQUEST", `llama.cpp takes at most ${maxServers} RPC servers`);
        const check = await this._check(parsed);
        this._write([...stored, {endpoint: parsed, enabled: false}]);
        if (check.ok) await this._apply(parsed, true);
        return this.get();
    }

    async remove(endpoint: string): Promise<RpcServers> {
        const parsed = parseEndpointOrRefuse(endpoint);
        const stored = readStored(this._db);
        const server = stored.find((entry) => entry.endpoint === parsed);
        if (server == null) throw new AppError("NOT_FOUND", `${parsed} is not in the list`);
        if (server.enabled) await this.setEnabled(parsed, false);
        this._write(readStored(this._db).filter((entry) => entry.endpoint !== parsed));
        this._checks.delete(parsed);
        return this.get();
    }

    /**
     * Uses the server for the engine, or stops using it: the engine restarts with the enabled servers (refused while an
     * answer is being written; no answer starts until the engine is back). Enabling checks the server first.
     */
    async setEnabled(endpoint: string, enabled: boolean): Promise<RpcServers> {
        const parsed = parseEndpointOrRefuse(endpoint);
        const stored = readStored(this._db);
        const server = stored.find((entry) => entry.endpoint === parsed);
        if (server == null) throw new AppError("NOT_FOUND", `${parsed} is not in the list`);
        if (server.enabled === enabled) return this.get();
        if (this._queue.running) throw new AppError("BUSY", "Stop the current answer before changing the RPC servers");
        if (enabled) {
            const check = await this._check(parsed);
            if (!check.ok) throw new AppError("BAD_REQUEST", `${parsed} cannot be used: ${check.error}`);
        }
        await this._apply(parsed, enabled);
        return this.get();
    }

    /** Stores the server's use and restarts the engine with the enabled servers, the model loaded again. */
    private async _apply(endpoint: string, enabled: boolean): Promise<void> {
        if (this._queue.running) throw new AppError("BUSY", "Stop the current answer before changing the RPC servers");
        const release = await this._queue.acquire();
        try {
            this._write(readStored(this._db).map((entry) => (entry.endpoint === endpoint ? {...entry, enabled} : entry)));
            await this._engine.restart(readRuntimeOptions(this._db));
        } finally {
            release();
        }
    }

    /** Checks a server again. One the engine holds is reported as the engine sees it (it serves one client at a time). */
    async check(endpoint: string): Promise<RpcServers> {
        const parsed = parseEndpointOrRefuse(endpoint);
        if (!readStored(this._db).some((entry) => entry.endpoint === parsed))
            throw new AppError("NOT_FOUND", `${parsed} is not in the list`);
        await this._check(parsed);
        return this.get();
    }

    private async _check(endpoint: string): Promise<RpcServerCheck> {
        const held = this._engine.status.build?.rpc?.servers.find((server) => server.endpoint === endpoint && server.connected);
        let check: RpcServerCheck;
        if (held != null) {
            check = this._heldCheck(held, new Date().toISOString());
        } else {
            const probed = await this._probe(endpoint, parseProtocol(this._engine.status.build?.rpc?.protocol ?? null));
            check = {
                at: new Date().toISOString(),
                ok: probed.ok,
                protocol: probed.protocol == null ? null : formatProtocol(probed.protocol),
                error: probed.ok ? null : probed.error,
                devices: probed.ok ? probed.devices.map(({freeBytes, totalBytes}) => ({freeBytes, totalBytes})) : [],
                inUse: false
            };
        }
        this._checks.set(endpoint, check);
        return check;
    }

    private _entry(server: Stored): RpcServerEntry {
        const held = this._engine.status.build?.rpc?.servers.find((state) => state.endpoint === server.endpoint);
        let check = this._checks.get(server.endpoint) ?? null;
        // What the running engine found when it started says more than an older check.
        if (held != null && server.enabled) check = this._heldCheck(held, check?.at ?? new Date().toISOString());
        return {
            endpoint: server.endpoint,
            enabled: server.enabled,
            warning: rpcExposureWarning(parseRpcEndpoint(server.endpoint).host),
            check
        };
    }

    /** A server as the running engine found it when it started (connected and held, or left out with the reason). */
    private _heldCheck(held: RpcServerState, at: string): RpcServerCheck {
        return {
            at,
            ok: held.connected,
            protocol: this._engine.status.build?.rpc?.protocol ?? null,
            error: held.error,
            devices: held.devices.map(({freeBytes, totalBytes}) => ({freeBytes, totalBytes})),
            inUse: held.connected
        };
    }

    private _write(servers: Stored[]): void {
        writeRpcServers(this._db, servers);
    }
}

function parseEndpointOrRefuse(endpoint: string): string {
    try {
        return parseRpcEndpoint(endpoint).endpoint;
    } catch (err) {
        throw new AppError("BAD_REQUEST", (err as Error).message);
    }
}

function parseProtocol(text: string | null): RpcProtocol | null {
    const match = text == null ? null : /^(\d+)\.(\d+)\.(\d+)$/.exec(text);
    return match == null ? null : {major: Number(match[1]), minor: Number(match[2]), patch: Number(match[3])};
}
