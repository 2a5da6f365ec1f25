import path from "node:path";

// The app's own page and what it may do, as pure functions of URLs (no Electron import, so tested under Node). The
// packaged renderer is served from `app://ponder/`, a scheme registered as standard and secure (a real origin for the
// CSP's 'self', fetch and the clipboard), never from file://, where every local file would share the page's origin.

export const APP_SCHEME = "app";
const APP_HOST = "ponder";
const APP_ORIGIN = `${APP_SCHEME}://${APP_HOST}`;
export const APP_PAGE_URL = `${APP_ORIGIN}/index.html`;

/** The privileges `app://` is registered with (protocol.registerSchemesAsPrivileged, before the app is ready). */
export const APP_SCHEME_PRIVILEGES = {standard: true, secure: true, supportFetchAPI: true, codeCache: true} as const;

/** Permissions the app's own page is granted; every other request of any page is denied. */
const GRANTED_PERMISSIONS: ReadonlySet<string> = new Set(["clipboard-sanitized-write"]);

/**
 * Whether `url` is the app's page: `app://ponder/index.html` (any query or fragment), or, in development, a page of the
 * dev server at `devUrl` (same origin).
 */
export function isAppPage(url: string, devUrl?: string): boolean {
    let parsed: URL;
    try {
        parsed = new URL(url);
    } catch {
        return false;
    }
    if (devUrl != null && devUrl !== "") {
        try {
            return parsed.origin === new URL(devUrl).origin;
        } catch {
            return false;
        }
    }
    return (
        parsed.protocol === `${APP_SCHEME}:` && parsed.host === APP_HOST && (parsed.pathname === "/" || parsed.pathname === "/index.html")
    );
}

/** Whether a permission request (or check) for `permission` from a page at `requestingUrl` is granted. */
export function isPermissionGranted(permission: string, requestingUrl: string, devUrl?: string): boolean {
    return GRANTED_PERMISSIONS.has(permission) && isAppPage(requestingUrl, devUrl);
}

/**
 * The file an `app://ponder/...` request names inside `rendererDir`, or null when the request must be refused: another
 * scheme or host, a path that leaves `rendererDir` (`..`, encoded or not), a drive letter or UNC path, a backslash, a NUL.
 * `/` is the page. `pathApi` is the platform's path module (`path.win32` on Windows).
 */
export function resolveAppRequest(url: string, rendererDir: string, pathApi: path.PlatformPath = path): string | null {
    let parsed: URL;
    try {
        parsed = new URL(url);
    } catch {
        return null;
    }
    if (parsed.protocol !== `${APP_SCHEME}:` || parsed.host !== APP_HOST) return null;
    let relative: string;
    try {
        relative = decodeURIComponent(parsed.pathname);
    } catch {
        return null; // malformed percent-encoding
    }
    if (relative === "/" || relative === "") relative = "/index.html";
    if (relative.includes("\0") || relative.includes("\\") || /^\/[A-Za-z]:/.test(relative)) return null;
    const segments = relative.split("/").filter((segment) => segment !== "");
    if (segments.some((segment) => segment === "." || segment === ".." || segment.includes(":"))) return null;
    const root = pathApi.resolve(rendererDir);
    const file = pathApi.resolve(root, ...segments);
    const inside = pathApi.relative(root, file);
    if (inside === "" || inside.startsWith("..") || pathApi.isAbsolute(inside)) return null;
    return file;
}
