import fs from "node:fs";
import path from "node:path";
import {app, BrowserWindow, dialog, net, protocol, session, shell, type IpcMainInvokeEvent} from "electron";
import {APP_PAGE_URL, APP_SCHEME, APP_SCHEME_PRIVILEGES, isAppPage} from "./appPage.js";
import {secureAppSession} from "./appSession.js";
import {createApp} from "./createApp.js";
import {FIRST_MODEL_FILE} from "./demo/shippedModelSample.js";
import {utilityEngine} from "./engine/host/utilityEngine.js";
import {DataDirLock, DataDirLockedError} from "./DataDirLock.js";
import {createDispatch} from "./ipc/dispatch.js";
import {createHandlers} from "./ipc/handlers.js";
import {registerElectronIpc} from "./ipc/registerElectronIpc.js";
import type {EventChannel, Events} from "../preload/contract.js";

const rendererDevUrl = process.env.ELECTRON_RENDERER_URL;
const rendererDir = path.join(import.meta.dirname, "../renderer");
let mainWindow: BrowserWindow | null = null;

function isTrustedSender(event: IpcMainInvokeEvent): boolean {
    return (
        mainWindow != null &&
        event.sender === mainWindow.webContents &&
        event.senderFrame != null &&
        isAppPage(event.senderFrame.url, rendererDevUrl)
    );
}

function createWindow(): BrowserWindow {
    const window = new BrowserWindow({
        width: 1280,
        height: 840,
        minWidth: 720,
        minHeight: 480,
        title: "Ponder",
        show: false,
        webPreferences: {
            preload: path.join(import.meta.dirname, "../preload/index.cjs"),
            contextIsolation: true,
            sandbox: true,
            nodeIntegration: false,
            webSecurity: true,
            spellcheck: true
        }
    });
    window.once("ready-to-show", () => window.show());
    // External links open in the browser; the app window never navigates away or opens others.
    window.webContents.setWindowOpenHandler(({url}) => {
        if (/^https?:\/\//.test(url)) void shell.openExternal(url);
        return {action: "deny"};
    });
    window.webContents.on("will-navigate", (event, url) => {
        if (!isAppPage(url, rendererDevUrl)) event.preventDefault();
    });
    void window.loadURL(rendererDevUrl ?? APP_PAGE_URL);
    return window;
}

// Before the app is ready: app:// is a standard, secure origin (the CSP's 'self', fetch, the clipboard).
protocol.registerSchemesAsPrivileged([{scheme: APP_SCHEME, privileges: APP_SCHEME_PRIVILEGES}]);

// A second instance hands over to the first ("second-instance" below) and starts nothing: no database, no engine.
if (!app.requestSingleInstanceLock()) app.quit();
else await start();

async function start(): Promise<void> {
    app.on("web-contents-created", (_event, contents) => {
        contents.on("will-attach-webview", (event) => event.preventDefault());
    });

    await app.whenReady();
    secureAppSession(session.defaultSession, {
        rendererDir,
        devUrl: rendererDevUrl,
        isAppWindow: (contents) => contents != null && mainWindow != null && contents === mainWindow.webContents,
        fetchFile: (fileUrl) => net.fetch(fileUrl)
    });

    // the headless server's default data directory is this one on Linux: one process per directory
    let lock: DataDirLock;
    try {
        lock = DataDirLock.acquire(app.getPath("userData"));
    } catch (err) {
        if (!(err instanceof DataDirLockedError)) throw err;
        dialog.showErrorBox("Ponder", err.message);
        app.exit(1);
        return;
    }

    let send: ReturnType<ReturnType<typeof registerElectronIpc>> | null = null;
    const services = createApp({
        dataDir: app.getPath("userData"),
        version: app.getVersion(),
        bundledModelPath: app.isPackaged
            ? path.join(process.resourcesPath, "models", FIRST_MODEL_FILE)
            : path.join(app.getAppPath(), "resources", "models", FIRST_MODEL_FILE),
        emit: <C extends EventChannel>(channel: C, payload: Events[C]) => send?.(channel, payload),
        // llama.cpp runs in a utility process: an abort or a crash there restarts the engine, not the window.
        engine: {spawn: utilityEngine(path.join(import.meta.dirname, "engineProcess.js"))}
    });
    const dispatch = createDispatch(
        createHandlers(services, {
            openExternal: (url) => shell.openExternal(url),
            pickModelFile: async () => {
                const result = await dialog.showOpenDialog(mainWindow!, {
                    title: "Open a GGUF model",
                    properties: ["openFile"],
                    filters: [{name: "GGUF models", extensions: ["gguf"]}]
                });
                return result.canceled ? null : (result.filePaths[0] ?? null);
            },
            pickTrimkvFiles: async () => {
                const result = await dialog.showOpenDialog(mainWindow!, {
                    title: "Open the TRIM-KV gates (trimkv_weights.pth)",
                    properties: ["openFile"],
                    filters: [{name: "PyTorch checkpoints", extensions: ["pth", "pt", "bin"]}]
                });
                const weights = result.canceled ? null : (result.filePaths[0] ?? null);
                if (weights == null) return null;
                const config = path.join(path.dirname(weights), "config.json");
                return {weights, config: fs.existsSync(config) ? config : null};
            }
        }),
        (message, err) => console.error(message, err)
    );
    const senderFor = registerElectronIpc(dispatch, isTrustedSender);

    mainWindow = createWindow();
    send = senderFor(mainWindow.webContents);
    void services.restoreLastModel();

    app.on("second-instance", () => {
        if (mainWindow?.isMinimized()) mainWindow.restore();
        mainWindow?.focus();
    });
    app.on("window-all-closed", () => app.quit());
    let disposed = false;
    app.on("before-quit", (event) => {
        if (disposed) return;
        event.preventDefault();
        disposed = true;
        void services.dispose().finally(() => {
            lock.dispose();
            app.quit();
        });
    });
}
