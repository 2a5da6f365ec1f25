import {afterEach, beforeEach, describe, expect, test, vi} from "vitest";
import {connectionLost, createSocketBridge} from "../../../renderer/lib/createSocketBridge.js";

/** Just enough of a browser WebSocket: the test opens, closes and feeds it. */
class FakeSocket {
    static instances: FakeSocket[] = [];
    onopen: (() => void) | null = null;
    onclose: (() => void) | null = null;
    onmessage: ((event: {data: string}) => void) | null = null;
    sent: unknown[] = [];
    constructor(readonly url: string) {
        FakeSocket.instances.push(this);
    }
    send(data: string): void {
        this.sent.push(JSON.parse(data));
    }
    close(): void {
        this.onclose?.();
    }
    open(): void {
        this.onopen?.();
    }
    receive(frame: unknown): void {
        this.onmessage?.({data: JSON.stringify(frame)});
    }
}

function setup() {
    const bridge = createSocketBridge({
        url: "ws://127.0.0.1:5173/bridge?token=t0k",
        WebSocket: FakeSocket as unknown as typeof WebSocket,
        minDelayMs: 100,
        maxDelayMs: 400
    });
    return {bridge, socket: () => FakeSocket.instances.at(-1)!};
}

describe("WebSocket bridge", () => {
    beforeEach(() => {
        FakeSocket.instances = [];
        vi.useFakeTimers();
    });
    afterEach(() => vi.useRealTimers());

    test("requests go out as frames once open and resolve with their response", async () => {
        const {bridge, socket} = setup();
        expect(socket().url).toBe("ws://127.0.0.1:5173/bridge?token=t0k");
        const pending = bridge.invoke("conversations:list", {query: "x"});
        expect(socket().sent).toEqual([]);
        socket().open();
        expect(socket().sent).toEqual([{id: 1, channel: "conversations:list", payload: {query: "x"}}]);
        socket().receive({id: 1, result: {ok: true, value: []}});
        await expect(pending).resolves.toEqual({ok: true, value: []});
    });

    test("events reach their listeners until unsubscribed", () => {
        const {bridge, socket} = setup();
        socket().open();
        const seen: unknown[] = [];
        const off = bridge.on("engine:status", (status) => seen.push(status.state));
        socket().receive({event: "engine:status", payload: {state: "ready"}});
        socket().receive({event: "chat:done", payload: {}});
        off();
        socket().receive({event: "engine:status", payload: {state: "idle"}});
        expect(seen).toEqual(["ready"]);
    });

    test("pending requests fail when the socket closes, then it reconnects with backoff", async () => {
        const {bridge, socket} = setup();
        const connection: boolean[] = [];
        bridge.onConnection((connected) => connection.push(connected));
        socket().open();
        const pending = bridge.invoke("app:status", undefined);
        socket().close();
        await expect(pending).resolves.toEqual({ok: false, error: connectionLost});
        expect(connectionLost.message).toBe("Connection to Ponder's backend lost");

        expect(FakeSocket.instances).toHaveLength(1);
        vi.advanceTimersByTime(100);
        expect(FakeSocket.instances).toHaveLength(2);
        socket().close();
        vi.advanceTimersByTime(199);
        expect(FakeSocket.instances).toHaveLength(2);
        vi.advanceTimersByTime(1);
        expect(FakeSocket.instances).toHaveLength(3);
        socket().open();
        expect(connection).toEqual([true, false, true]);
    });

    test("dispose stops reconnecting and fails what is pending", async () => {
        const {bridge, socket} = setup();
        const pending = bridge.invoke("app:status", undefined);
        bridge.dispose();
        await expect(pending).resolves.toEqual({ok: false, error: connectionLost});
        vi.advanceTimersByTime(10_000);
        expect(FakeSocket.instances).toHaveLength(1);
        expect(socket().sent).toEqual([]);
    });
});
