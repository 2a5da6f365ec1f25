import type {PonderApi, Result, ServerRequestLog, ServerSettings, ServerStatus} from "../../preload/contract.js";
import {request} from "./request.js";
import {succeeded} from "./succeeded.js";

export type Server = ReturnType<typeof createServer>;

/** Requests the panel keeps; the main process keeps as many. */
const logSize = 100;

/** The address a client reads before `host` and `port` are applied: what a person types, checked as the main process will. */
export function checkAddress(host: string, port: string): string | null {
    if (!/^[A-Za-z0-9.:-]+$/.test(host.trim())) return "The address must be a host name or an IP address, such as 127.0.0.1";
    const number = Number(port);
    if (!Number.isInteger(number) || number < 0 || number > 65_535) return "The port must be a whole number from 0 to 65535";
    return null;
}

/** Whether an address is this machine only: anything else needs an API key. */
export function isLoopbackHost(host: string): boolean {
    return host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/**
 * The local API server as the Server panel shows it: its status, its settings, the key (shown once, right after
 * it is generated) and a live log of requests from `server:request` events.
 */
export function createServer(bridge: PonderApi) {
    const state = $state({
        status: null as ServerStatus | null,
        /** Newest first. */
        log: [] as ServerRequestLog[],
        /** The key just generated: shown until the panel closes or another is made, never fetched again. */
        newKey: null as string | null,
        /** The log entry whose memory the gauge shows; the newest when `null`. */
        selectedId: null as string | null,
        busy: false,
        error: null as string | null
    });

    function upsert(entry: ServerRequestLog): void {
        const index = state.log.findIndex((existing) => existing.id === entry.id);
        if (index >= 0) state.log[index] = entry;
        else state.log = [entry, ...state.log].slice(0, logSize);
    }

    async function load(): Promise<void> {
        const result = await request(bridge, "server:get", undefined);
        if (!succeeded(result, state, "Could not read the API server's state")) return;
        state.status = result.value.status;
        state.log = result.value.log;
    }

    async function run<T>(action: string, call: () => Promise<Result<T>>): Promise<T | null> {
        state.busy = true;
        const result = await call();
        state.busy = false;
        if (!succeeded(result, state, action)) return null;
        return result.value;
    }

    /** Changes settings (turning the server on or off among them); `false` with `state.error` set when refused. */
    async function update(patch: Partial<ServerSettings>): Promise<boolean> {
        const status = await run("Could not change the API server", () => request(bridge, "server:update", patch));
        if (status != null) state.status = status;
        return status != null;
    }

    async function generateKey(): Promise<boolean> {
        const answer = await run("Could not make an API key", () => request(bridge, "server:generateKey", undefined));
        if (answer == null) return false;
        state.status = answer.status;
        state.newKey = answer.key;
        return true;
    }

    async function clearKey(): Promise<boolean> {
        const status = await run("Could not remove the API key", () => request(bridge, "server:clearKey", undefined));
        if (status != null) {
            state.status = status;
            state.newKey = null;
        }
        return status != null;
    }

    const selected = $derived(
        state.log.find((entry) => entry.id === state.selectedId) ?? state.log.find((entry) => entry.sample != null) ?? null
    );

    const offStatus = bridge.on("server:status", (status) => (state.status = status));
    const offRequest = bridge.on("server:request", upsert);

    return {
        state,
        load,
        update,
        generateKey,
        clearKey,
        /** The request whose memory reading the gauge shows. */
        get selected() {
            return selected;
        },
        /** Forgets the key shown once. */
        hideKey(): void {
            state.newKey = null;
        },
        dispose(): void {
            offStatus();
            offRequest();
        }
    };
}
