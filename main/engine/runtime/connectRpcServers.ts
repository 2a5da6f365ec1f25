import type {Llama} from "node-llama-cpp";
import type {RpcRuntime, RpcServerState} from "../../../preload/contract/engine.js";
import {ponderBindingsOf, type PonderRpcDevice} from "../native/ponderAddon.js";
import {formatProtocol, probeRpcServer, type RpcProbe, type RpcProtocol} from "../rpc/probeRpcServer.js";

export type ConnectRpcOptions = {
    /** Defaults to `probeRpcServer`; tests pass their own. */
    probe?: (endpoint: string, expected: RpcProtocol | null) => Promise<RpcProbe>;
};

/**
 * Registers the rpc-servers at `endpoints` with llama.cpp in this process (patch 0010's `ponderRpcAddServer`), so that
 * every model loaded afterwards can place its offloaded layers on their devices. Each server is checked over the wire
 * first (reachable, same protocol version): ggml would abort the process on one that is not. A server that fails its
 * check is left out, with the reason; the others are used. Registering cannot be undone in a process: a different set
 * of servers needs another engine process (EngineProxy restarts it).
 */
export async function connectRpcServers(llama: Llama, endpoints: readonly string[], options: ConnectRpcOptions = {}): Promise<RpcRuntime> {
    const bindings = ponderBindingsOf(llama);
    const protocol = bindings.ponderRpcProtocol?.() ?? null;
    const probe = options.probe ?? ((endpoint: string, expected: RpcProtocol | null) => probeRpcServer(endpoint, {expected}));
    const servers: RpcServerState[] = [];
    for (const endpoint of new Set(endpoints)) {
        if (protocol == null || bindings.ponderRpcAddServer == null) {
            servers.push({
                endpoint,
                connected: false,
                error: "this engine build has no RPC backend (rebuild it: npm run build:native)",
                devices: []
            });
            continue;
        }
        const checked = await probe(endpoint, protocol);
        if (!checked.ok) {
            servers.push({endpoint: checked.endpoint, connected: false, error: checked.error, devices: []});
            continue;
        }
        try {
            const devices = bindings.ponderRpcAddServer(checked.endpoint);
            servers.push({endpoint: checked.endpoint, connected: true, error: null, devices: devices.map(toDevice)});
        } catch (err) {
            servers.push({endpoint: checked.endpoint, connected: false, error: (err as Error).message, devices: []});
        }
    }
    return {protocol: protocol == null ? null : formatProtocol(protocol), servers};
}

/** What the status says about servers that could not be used, or `null` when every one is connected. */
export function describeRpcProblems(rpc: RpcRuntime): string | null {
    const failed = rpc.servers.filter((server) => !server.connected);
    if (failed.length === 0) return null;
    const list = failed.map((server) => `${server.endpoint} (${server.error})`).join("; ");
    return `RPC server${failed.length > 1 ? "s" : ""} not used: ${list}. Models load without ${failed.length > 1 ? "them" : "it"}.`;
}

function toDevice(device: PonderRpcDevice) {
    return {name: device.name, description: device.description, freeBytes: device.freeBytes, totalBytes: device.totalBytes};
}
