// The Electron session set-up: app:// serves the built renderer and nothing else; permissions are denied except the
// clipboard write of the app's own page in the app's window (the copy buttons).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {fileURLToPath} from "node:url";
import {afterAll, beforeAll, describe, expect, test} from "vitest";
import {APP_PAGE_URL} from "../../../main/appPage.js";
import {secureAppSession, type AppSession} from "../../../main/appSession.js";

type WebContents = {getURL(): string};

type ProtocolHandler = (request: Request) => Promise<Response>;
type RequestHandler = (
    contents: WebContents,
    permission: string,
    callback: (granted: boolean) => void,
    details: {requestingUrl: string}
) => void;
type CheckHandler = (contents: WebContents | null, permission: string, origin: string, details: {requestingUrl?: string}) => boolean;

let rendererDir: string;
const appWindow = {getURL: () => APP_PAGE_URL} as unknown as WebContents;
const otherContents = {getURL: () => APP_PAGE_URL} as unknown as WebContents;

function setUp(devUrl?: string) {
    const handlers: {scheme?: string; protocol?: ProtocolHandler; request?: RequestHandler; check?: CheckHandler} = {};
    const session = {
        protocol: {handle: (scheme: string, handler: ProtocolHandler) => Object.assign(handlers, {scheme, protocol: handler})},
        setPermissionRequestHandler: (handler: RequestHandler) => (handlers.request = handler),
        setPermissionCheckHandler: (handler: CheckHandler) => (handlers.check = handler)
    } as unknown as AppSession<WebContents>;
    secureAppSession(session, {
        rendererDir,
        devUrl,
        isAppWindow: (contents) => contents === appWindow,
        // what Electron's net.fetch does for a file URL, minus the MIME type
        fetchFile: async (fileUrl) => new Response(await fs.promises.readFile(fileURLToPath(fileUrl)))
    });
    const request = (contents: WebContents, permission: string, requestingUrl: string) => {
        let granted: boolean | null = null;
        handlers.request!(contents, permission, (value) => (granted = value), {requestingUrl});
        return granted;
    };
    return {handlers, request};
}

beforeAll(() => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-renderer-"));
    rendererDir = path.join(root, "renderer");
    fs.mkdirSync(path.join(rendererDir, "assets"), {recursive: true});
    fs.writeFileSync(path.join(rendererDir, "index.html"), "<!doctype html><title>Ponder</title>");
    fs.writeFileSync(path.join(rendererDir, "assets", "index.js"), "console.log(1)");
    fs.writeFileSync(path.join(root, "secret.txt"), "not for the page");
});

afterAll(() => {
    fs.rmSync(path.dirname(rendererDir), {recursive: true, force: true});
});

describe("app://", () => {
    test("serves the page and its assets from the renderer folder", async () => {
        const {handlers} = setUp();
        expect(handlers.scheme).toBe("app");
        const page = await handlers.protocol!({url: APP_PAGE_URL} as Request);
        expect(page.status).toBe(200);
        expect(await page.text()).toContain("<title>Ponder</title>");
        expect(await (await handlers.protocol!({url: "app://ponder/assets/index.js"} as Request)).text()).toBe("console.log(1)");
    });

    test("answers 404 for files outside the folder, other hosts and missing files", async () => {
        const {handlers} = setUp();
        for (const url of [
            "app://ponder/..%2fsecret.txt",
            "app://ponder/assets%5c..%5c..%5csecret.txt",
            "app://other/index.html",
            "app://ponder/missing.js"
        ]) {
            const response = await handlers.protocol!({url} as Request);
            expect(response.status, url).toBe(404);
            expect(await response.text(), url).not.toContain("not for the page");
        }
    });
});

describe("permissions", () => {
    test("the app's window and page may write to the clipboard", () => {
        const {handlers, request} = setUp();
        expect(request(appWindow, "clipboard-sanitized-write", APP_PAGE_URL)).toBe(true);
        expect(handlers.check!(appWindow, "clipboard-sanitized-write", "app://ponder", {requestingUrl: APP_PAGE_URL})).toBe(true);
    });

    test("every other permission, page and window is denied", () => {
        const {handlers, request} = setUp();
        for (const permission of ["clipboard-read", "media", "notifications", "geolocation", "openExternal", "midi"])
            expect(request(appWindow, permission, APP_PAGE_URL), permission).toBe(false);
        expect(request(otherContents, "clipboard-sanitized-write", APP_PAGE_URL)).toBe(false);
        expect(request(appWindow, "clipboard-sanitized-write", "https://example.com/")).toBe(false);
        expect(handlers.check!(null, "clipboard-sanitized-write", "app://ponder", {requestingUrl: APP_PAGE_URL})).toBe(false);
        expect(handlers.check!(appWindow, "clipboard-read", "app://ponder", {requestingUrl: APP_PAGE_URL})).toBe(false);
    });

    test("in development the dev server's page is the app's page", () => {
        const {request} = setUp("http://localhost:5173/");
        expect(request(appWindow, "clipboard-sanitized-write", "http://localhost:5173/")).toBe(true);
        expect(request(appWindow, "clipboard-sanitized-write", APP_PAGE_URL)).toBe(false);
    });
});
