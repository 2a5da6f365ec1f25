import type {
    BridgeEventFrame,
    BridgeRequestFrame,
    BridgeResponseFrame,
    ErrorInfo,
    EventChannel,
    Events,
    PonderApi,
    Req,
    RequestChannel,
    Res,
    Result
} from "../../preload/contract.js";

export type SocketBridgeOptions = {
    /** `ws://host/bridge?token=...` */
    url: string;
    /** WebSocket constructor. Defaults to `globalThis.WebSocket`. */
    WebSocket?: typeof WebSocket;
    /** Delay before the first reconnection attempt, doubled on each failure. Defaults to `250`. */
    minDelayMs?: number;
    /** Longest delay between reconnection attempts. Defaults to `5000`. */
    maxDelayMs?: number;
};

/** A `PonderApi` over the loopback WebSocket, plus what a socket adds: connection changes and disposal. */
export type SocketBridge = PonderApi & {
    /** Calls `listener(true)` on every (re)connection and `listener(false)` when an open connection drops. */
    onConnection(listener: (connected: boolean) => void): () => void;
    dispose(): void;
};

export const connectionLost: ErrorInfo = {code: "INTERNAL", message: "Connection to Ponder's backend lost"};

type Pending = {frame: string; sent: boolean; resolve: (result: Result<unknown>) => void};

export function createSocketBridge(options: SocketBridgeOptions): SocketBridge {
    const Socket = options.WebSocket ?? globalThis.WebSocket;
    const minDelayMs = options.minDelayMs ?? 250;
    const maxDelayMs = options.maxDelayMs ?? 5000;
    const pending = new Map<number, Pending>();
    const listeners = new Map<EventChannel, Set<(payload: never) => void>>();
    const connectionListeners = new Set<(connected: boolean) => void>();
    let socket: WebSocket | null = null;
    let open = false;
    let nextId = 1;
    let attempt = 0;
    let timer: ReturnType<typeof setTimeout> | null = null;
    let disposed = false;

    function connect(): void {
        timer = null;
        if (disposed) return;

        const ws = new Socket(options.url);
        socket = ws;
        ws.onopen = () => {
            open = true;
            attempt = 0;
            for (const request of pending.values())
                if (!request.sent) {
                    ws.send(request.frame);
                    request.sent = true;
                }
            for (const listener of connectionListeners) listener(true);
        };
        ws.onmessage = (event: MessageEvent) => receive(event.data);
        ws.onclose = () => {
            if (socket !== ws) return;
            socket = null;
            failPending();
            if (open) {
                open = false;
                for (const listener of connectionListeners) listener(false);
            }
            scheduleReconnect();
        };
    }

    function scheduleReconnect(): void {
        if (disposed || timer != null) return;
        const delay = Math.min(maxDelayMs, minDelayMs * 2 ** attempt);
        attempt++;
        timer = setTimeout(connect, delay);
    }

    function failPending(): void {
        const requests = [...pending.values()];
        pending.clear();
        for (const request of requests) request.resolve({ok: false, error: connectionLost});
    }

    function receive(data: unknown): void {
        let frame: Partial<BridgeResponseFrame & BridgeEventFrame>;
        try {
            frame = JSON.parse(String(data)) as Partial<BridgeResponseFrame & BridgeEventFrame>;
        } catch {
            return;
        }
        if (typeof frame.id === "number" && frame.result != null) {
            const request = pending.get(frame.id);
            pending.delete(frame.id);
            request?.resolve(frame.result);
        } else if (typeof frame.event === "string") {
            for (const listener of listeners.get(frame.event) ?? []) (listener as (payload: unknown) => void)(frame.payload);
        }
    }

    function invoke<C extends RequestChannel>(channel: C, payload: Req<C>): Promise<Result<Res<C>>> {
        if (disposed) return Promise.resolve({ok: false, error: connectionLost});
        const id = nextId++;
        const frame: BridgeRequestFrame = {id, channel, payload};
        return new Promise((resolve) => {
            const request: Pending = {frame: JSON.stringify(frame), sent: false, resolve: resolve as Pending["resolve"]};
            pending.set(id, request);
            if (open && socket) {
                socket.send(request.frame);
                request.sent = true;
            }
        });
    }

    function on<C extends EventChannel>(channel: C, listener: (payload: Events[C]) => void): () => void {
        let set = listeners.get(channel);
        if (!set) {
            set = new Set();
            listeners.set(channel, set);
        }
        set.add(listener);
        return () => void set.delete(listener);
    }

    function onConnection(listener: (connected: boolean) => void): () => void {
        connectionListeners.add(listener);
        return () => void connectionListeners.delete(listener);
    }

    function dispose(): void {
        disposed = true;
        if (timer != null) clearTimeout(timer);
        const ws = socket;
        socket = null;
        open = false;
        failPending();
        ws?.close();
    }

    connect();
    return {invoke, on, onConnection, dispose};
}
