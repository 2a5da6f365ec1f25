import {ipcMain, type IpcMainInvokeEvent, type WebContents} from "electron";
import {requestChannels, type EventChannel, type Events} from "../../preload/contract.js";
import type {Dispatch} from "./dispatch.js";

/**
 * Binds every request channel to the dispatch, refusing any sender that is not the app's own
 * window and page. Returns the function that sends events to that window.
 */
export function registerElectronIpc(dispatch: Dispatch, isTrustedSender: (event: IpcMainInvokeEvent) => boolean) {
    for (const channel of requestChannels) {
        ipcMain.handle(channel, async (event, payload: unknown) => {
            if (!isTrustedSender(event)) return {ok: false, error: {code: "FORBIDDEN", message: "Request refused: unknown sender"}};
            return dispatch(channel, payload);
        });
    }

    return (target: WebContents | null) =>
        <C extends EventChannel>(channel: C, payload: Events[C]) => {
            if (target != null && !target.isDestroyed()) target.send(channel, payload);
        };
}
