import type {PonderApi, RpcServers} from "../../preload/contract.js";
import {describeError} from "../lib/describeError.js";
import {request} from "./request.js";
import {succeeded} from "./succeeded.js";

export type RpcServersState = ReturnType<typeof createRpcServers>;

/** The rpc-servers of the Engine panel: the list with each one's last check, and the change under way. */
export function createRpcServers(bridge: PonderApi) {
    const state = $state({
        /** The servers and the engine's protocol; `null` until read. */
        list: null as RpcServers | null,
        /** The endpoint being added, checked, switched or removed; `null` when none is. */
        pending: null as string | null,
        error: null as string | null
    });

    async function load(): Promise<void> {
        const result = await request(bridge, "rpc:list", undefined);
        if (!succeeded(result, state, "Could not list the RPC servers")) return;
        state.list = result.value;
    }

    /** Runs one change; on failure says why and reads the list again (a restart may have happened anyway). */
    async function change(endpoint: string, what: string, run: () => ReturnType<typeof request<"rpc:list">>): Promise<boolean> {
        if (state.pending != null) return false;
        state.pending = endpoint;
        state.error = null;
        const result = await run();
        state.pending = null;
        if (!result.ok) {
            const error = describeError(what, result.error);
            await load();
            state.error = error;
            return false;
        }
        state.list = result.value;
        return true;
    }

    return {
        state,
        load,
        add: (endpoint: string) => change(endpoint, `Could not add ${endpoint}`, () => request(bridge, "rpc:add", {endpoint})),
        remove: (endpoint: string) => change(endpoint, `Could not remove ${endpoint}`, () => request(bridge, "rpc:remove", {endpoint})),
        check: (endpoint: string) => change(endpoint, `Could not check ${endpoint}`, () => request(bridge, "rpc:check", {endpoint})),
        setEnabled: (endpoint: string, enabled: boolean) =>
            change(endpoint, `Could not ${enabled ? "use" : "stop using"} ${endpoint}`, () =>
                request(bridge, "rpc:setEnabled", {endpoint, enabled})
            )
    };
}
