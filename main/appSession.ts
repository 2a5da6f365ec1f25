import {pathToFileURL} from "node:url";
import {APP_SCHEME, isPermissionGranted, resolveAppRequest} from "./appPage.js";

/** The part of Electron's `Session` this module sets up (Electron stays imported by the entry point alone). */
export type AppSession<Contents extends {getURL(): string}> = {
    protocol: {handle(scheme: string, handler: (request: Request) => Promise<Response>): void};
    setPermissionRequestHandler(
        handler: (contents: Contents, permission: string, callback: (granted: boolean) => void, details: {requestingUrl?: string}) => void
    ): void;
    setPermissionCheckHandler(
        handler: (contents: Contents | null, permission: string, origin: string, details: {requestingUrl?: string}) => boolean
    ): void;
};

export type AppSessionOptions<Contents> = {
    /** The built renderer (`out/renderer`): the only files `app://ponder/` serves. */
    rendererDir: string;
    /** The dev server's URL in `npm run dev`, whose pages count as the app's page. Defaults to `undefined`. */
    devUrl?: string;
    /** Whether `contents` is the app's window; permissions are granted to it alone. */
    isAppWindow(contents: Contents | null): boolean;
    /** Reads a file URL into a response (Electron's `net.fetch`, which sets the MIME type). */
    fetchFile(fileUrl: string): Promise<Response>;
};

/**
 * Serves the renderer from `app://ponder/` and sets the session's permission handlers: every permission of every page
 * is denied, except what {@link isPermissionGranted} grants the app's own page in the app's window (the copy buttons'
 * clipboard write).
 */
export function secureAppSession<Contents extends {getURL(): string}>(
    session: AppSession<Contents>,
    options: AppSessionOptions<Contents>
): void {
    const {rendererDir, devUrl, isAppWindow, fetchFile} = options;

    session.protocol.handle(APP_SCHEME, async (request) => {
        const file = resolveAppRequest(request.url, rendererDir);
        if (file == null) return new Response("Not found", {status: 404, headers: {"content-type": "text/plain"}});
        try {
            return await fetchFile(pathToFileURL(file).href);
        } catch {
            return new Response("Not found", {status: 404, headers: {"content-type": "text/plain"}});
        }
    });

    session.setPermissionRequestHandler((contents, permission, callback, details) => {
        callback(isAppWindow(contents) && isPermissionGranted(permission, details.requestingUrl ?? "", devUrl));
    });
    session.setPermissionCheckHandler((contents, permission, _origin, details) => {
        return isAppWindow(contents) && isPermissionGranted(permission, details.requestingUrl ?? contents?.getURL() ?? "", devUrl);
    });
}
