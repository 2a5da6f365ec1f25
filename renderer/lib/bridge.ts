import type {PonderApi} from "../../preload/contract.js";
import {createSocketBridge, type SocketBridge} from "./createSocketBridge.js";

let bridge: PonderApi | SocketBridge | null = null;

/**
 * The one `PonderApi` of this window: Electron's preload bridge when present, otherwise a WebSocket client to the
 * headless backend serving this page (`ws://<host>/bridge?token=<token from ?token=...>`).
 */
export function getBridge(): PonderApi | SocketBridge {
    if (bridge) return bridge;
    if (window.ponder) return (bridge = window.ponder);

    const token = new URLSearchParams(location.search).get("token") ?? "";
    return (bridge = createSocketBridge({url: `ws://${location.host}/bridge?token=${encodeURIComponent(token)}`}));
}
