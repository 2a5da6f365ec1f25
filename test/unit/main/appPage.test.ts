// The app's page (app://ponder/), what it may be granted, and how app:// requests map onto the built renderer's files,
// with POSIX and Windows paths.
import path from "node:path";
import {describe, expect, test} from "vitest";
import {APP_PAGE_URL, isAppPage, isPermissionGranted, resolveAppRequest} from "../../../main/appPage.js";

describe("isAppPage", () => {
    test("the packaged page is app://ponder/index.html, with any query or fragment", () => {
        expect(isAppPage(APP_PAGE_URL)).toBe(true);
        expect(isAppPage("app://ponder/")).toBe(true);
        expect(isAppPage("app://ponder/index.html?x=1#settings")).toBe(true);
    });

    test("file:// pages are not the app, wherever they are, on Windows paths too", () => {
        expect(isAppPage("file:///C:/Program%20Files/Ponder/resources/app.asar/out/renderer/index.html")).toBe(false);
        expect(isAppPage("file:///opt/Ponder/resources/app.asar/out/renderer/index.html")).toBe(false);
    });

    test("other hosts, schemes and files are refused", () => {
        for (const url of [
            "app://evil/index.html",
            "app://ponder/other.html",
            "app://ponder/assets/index.js",
            "https://ponder/index.html",
            "http://127.0.0.1:5173/",
            "not a url",
            ""
        ])
            expect(isAppPage(url), url).toBe(false);
    });

    test("in development the dev server's origin is the app, and only it", () => {
        const dev = "http://localhost:5173/";
        expect(isAppPage("http://localhost:5173/", dev)).toBe(true);
        expect(isAppPage("http://localhost:5173/index.html?x", dev)).toBe(true);
        // a prefix match would accept this one
        expect(isAppPage("http://localhost:5173.evil.example/", dev)).toBe(false);
        expect(isAppPage("http://localhost:5174/", dev)).toBe(false);
        expect(isAppPage(APP_PAGE_URL, dev)).toBe(false);
    });
});

describe("isPermissionGranted", () => {
    test("the app's page may write to the clipboard (the copy buttons)", () => {
        expect(isPermissionGranted("clipboard-sanitized-write", APP_PAGE_URL)).toBe(true);
    });

    test("nothing else, and nobody else", () => {
        for (const permission of ["clipboard-read", "media", "notifications", "geolocation", "openExternal", "fullscreen"])
            expect(isPermissionGranted(permission, APP_PAGE_URL), permission).toBe(false);
        expect(isPermissionGranted("clipboard-sanitized-write", "https://example.com/")).toBe(false);
        expect(isPermissionGranted("clipboard-sanitized-write", "file:///tmp/index.html")).toBe(false);
    });
});

describe("resolveAppRequest", () => {
    const posixRoot = "/opt/Ponder/resources/app.asar/out/renderer";
    const windowsRoot = "C:\\Program Files\\Ponder\\resources\\app.asar\\out\\renderer";

    test("maps the page and its assets into the renderer folder (POSIX)", () => {
        expect(resolveAppRequest("app://ponder/", posixRoot, path.posix)).toBe(`${posixRoot}/index.html`);
        expect(resolveAppRequest("app://ponder/index.html?x#y", posixRoot, path.posix)).toBe(`${posixRoot}/index.html`);
        expect(resolveAppRequest("app://ponder/assets/index-abc.js", posixRoot, path.posix)).toBe(`${posixRoot}/assets/index-abc.js`);
        expect(resolveAppRequest("app://ponder/assets/KaTeX%20Main.woff2", posixRoot, path.posix)).toBe(
            `${posixRoot}/assets/KaTeX Main.woff2`
        );
    });

    test("maps the page and its assets into the renderer folder (Windows)", () => {
        expect(resolveAppRequest("app://ponder/", windowsRoot, path.win32)).toBe(`${windowsRoot}\\index.html`);
        expect(resolveAppRequest("app://ponder/assets/index-abc.js", windowsRoot, path.win32)).toBe(`${windowsRoot}\\assets\\index-abc.js`);
    });

    test("refuses every way out of the renderer folder", () => {
        const escapes = [
            "app://ponder/..%2f..%2fpackage.json",
            "app://ponder/..%5c..%5cpackage.json",
            "app://ponder/assets%5c..%5c..%5cpackage.json",
            "app://ponder/C:%5cWindows%5cwin.ini",
            "app://ponder/C:/Windows/win.ini",
            "app://ponder/%5c%5cserver%5cshare%5cfile",
            "app://ponder/index.html%00.png",
            "app://ponder/%E0%A4%A",
            "app://other/index.html",
            "file:///etc/passwd",
            "https://ponder/index.html"
        ];
        for (const url of escapes) {
            expect(resolveAppRequest(url, posixRoot, path.posix), `${url} (POSIX)`).toBeNull();
            expect(resolveAppRequest(url, windowsRoot, path.win32), `${url} (Windows)`).toBeNull();
        }
    });

    test("dot segments the URL parser resolves stay inside the folder", () => {
        expect(resolveAppRequest("app://ponder/assets/../index.html", posixRoot, path.posix)).toBe(`${posixRoot}/index.html`);
        expect(resolveAppRequest("app://ponder/../../etc/passwd", posixRoot, path.posix)).toBe(`${posixRoot}/etc/passwd`);
        expect(resolveAppRequest("app://ponder/%2e%2e/%2E%2E/main/index.js", posixRoot, path.posix)).toBe(`${posixRoot}/main/index.js`);
        expect(resolveAppRequest("app://ponder/%2e%2e/%2E%2E/main/index.js", windowsRoot, path.win32)).toBe(
            `${windowsRoot}\\main\\index.js`
        );
    });
});
