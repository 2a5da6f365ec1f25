import {z} from "zod";
import type {AppDatabase} from "../db/AppDatabase.js";
import {parseRpcEndpoint} from "../engine/rpc/rpcEndpoint.js";

const storageKey = "rpcServers";
/** ggml takes at most this many (GGML_RPC_MAX_SERVERS). */
export const maxRpcServers = 16;

const storedSchema = z.object({
    servers: z.array(z.object({endpoint: z.string(), enabled: z.boolean()})).max(maxRpcServers)
});

export type StoredRpcServer = {endpoint: string; enabled: boolean};

/** The rpc-servers of the engine settings; none when nothing is stored or the stored value is damaged. */
export function readRpcServers(db: AppDatabase): StoredRpcServer[] {
    const parsed = storedSchema.safeParse(db.settings.get(storageKey));
    if (!parsed.success) return [];
    return parsed.data.servers.flatMap((server) => {
        try {
            return [{endpoint: parseRpcEndpoint(server.endpoint).endpoint, enabled: server.enabled}];
        } catch {
            return [];
        }
    });
}

/** The endpoints of the enabled rpc-servers: the engine's. */
export function readEnabledRpcServers(db: AppDatabase): string[] {
    return readRpcServers(db)
        .filter((server) => server.enabled)
        .map((server) => server.endpoint);
}

export function writeRpcServers(db: AppDatabase, servers: StoredRpcServer[]): void {
    db.settings.set(storageKey, {servers});
}
