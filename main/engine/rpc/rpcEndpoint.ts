import net from "node:net";
import type {RpcRuntime} from "../../../preload/contract/engine.js";

/** An rpc-server's address as ggml takes it: "host:port" (ggml-rpc.cpp's parse_endpoint splits at the first colon). */
export type RpcEndpoint = {host: string; port: number; endpoint: string};

/** The port `npm run rpc-server` and the settings suggest (rpc-server's own default). */
const defaultRpcPort = 50052;

/**
 * Parses "host:port" (a host name or an IPv4 address; ggml cannot take an IPv6 address). Throws an Error saying what is
 * wrong, for a person.
 */
export function parseRpcEndpoint(text: string): RpcEndpoint {
    const trimmed = text.trim();
    if (trimmed.startsWith("[") || trimmed.split(":").length > 2)
        throw new Error(`"${text}": llama.cpp's RPC client takes a host name or an IPv4 address, not IPv6`);
    const colon = trimmed.indexOf(":");
    if (trimmed === "" || colon <= 0) throw new Error(`"${text}" is not host:port (for example 192.168.1.20:${defaultRpcPort})`);
    const host = trimmed.slice(0, colon);
    const portText = trimmed.slice(colon + 1);
    if (!/^[A-Za-z0-9.-]{1,253}$/.test(host) || host.startsWith("-") || host.startsWith("."))
        throw new Error(`"${host}" is not a host name or an IPv4 address`);
    if (!/^\d{1,5}$/.test(portText) || Number(portText) < 1 || Number(portText) > 65535)
        throw new Error(`"${portText}" is not a port (1 to 65535)`);
    const port = Number(portText);
    return {host, port, endpoint: `${host}:${port}`};
}

/** Whether `host` names this machine only (127.0.0.0/8, localhost): an rpc-server there is not reachable from the network. */
export function isLoopbackHost(host: string): boolean {
    if (host === "localhost" || host.endsWith(".localhost")) return true;
    return net.isIPv4(host) && host.startsWith("127.");
}

/** What to tell a person about an rpc-server at `host`, which has no authentication (its README: never expose it). */
export function rpcExposureWarning(host: string): string | null {
    if (isLoopbackHost(host)) return null;
    return (
        `${host} is not this machine: the rpc-server there accepts any client that can reach it (it has no authentication ` +
        "and runs whatever graphs it is sent). Run it only on a network you trust, never on an open one."
    );
}

/** Whether the engine places offloaded layers on remote devices: at least one rpc-server is connected. */
export function hasRpcDevices(rpc: RpcRuntime | null | undefined): boolean {
    return rpc?.servers.some((server) => server.connected) ?? false;
}
