import {contextBridge, ipcRenderer, type IpcRendererEvent} from "electron";
import {eventChannels, requestChannels, type PonderApi} from "./contract.js";

// The sandboxed bridge: exactly the contract's channels, nothing else of Electron.
const api: PonderApi = {
    invoke(channel, payload) {
        if (!(requestChannels as readonly string[]).includes(channel))
            return Promise.resolve({ok: false, error: {code: "BAD_REQUEST", message: `Unknown channel ${channel}`}});
        return ipcRenderer.invoke(channel, payload);
    },
    on(channel, listener) {
        if (!(eventChannels as readonly string[]).includes(channel)) throw new Error(`Unknown event channel ${channel}`);
        const wrapped = (_event: IpcRendererEvent, payload: Parameters<typeof listener>[0]) => listener(payload);
        ipcRenderer.on(channel, wrapped);
        return () => void ipcRenderer.removeListener(channel, wrapped);
    }
};

contextBridge.exposeInMainWorld("ponder", api);
