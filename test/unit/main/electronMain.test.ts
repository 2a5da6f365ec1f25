// main/index.ts under a stand-in for Electron's API: a second instance quits and starts nothing (no database, no
// engine, no window), and app:// is registered as privileged before the app is ready.
import {beforeEach, expect, test, vi} from "vitest";

const calls: string[] = [];
const lock = {granted: false};
const privileged: unknown[] = [];

vi.mock("electron", () => ({
    app: {
        requestSingleInstanceLock: () => {
            calls.push("requestSingleInstanceLock");
            return lock.granted;
        },
        quit: () => calls.push("quit"),
        whenReady: () => {
            calls.push("whenReady");
            return new Promise(() => {}); // never ready: only what happens before it matters here
        },
        on: (event: string) => calls.push(`on ${event}`),
        getPath: () => {
            throw new Error("a second instance must not open the data directory");
        }
    },
    protocol: {registerSchemesAsPrivileged: (schemes: unknown[]) => privileged.push(...schemes)},
    BrowserWindow: class {},
    dialog: {},
    ipcMain: {handle: () => calls.push("ipcMain.handle")},
    net: {},
    session: {},
    shell: {}
}));

beforeEach(() => {
    calls.length = 0;
    privileged.length = 0;
    vi.resetModules();
});

test("a second instance quits and returns: it never waits for ready, opens data or registers IPC", async () => {
    lock.granted = false;
    await import("../../../main/index.js");
    expect(calls).toEqual(["requestSingleInstanceLock", "quit"]);
});

test("the first instance registers app:// as a privileged, secure, standard scheme before it is ready", async () => {
    lock.granted = true;
    void import("../../../main/index.js");
    await vi.waitFor(() => expect(calls).toContain("whenReady"));
    expect(calls.indexOf("requestSingleInstanceLock")).toBeLessThan(calls.indexOf("whenReady"));
    expect(privileged).toEqual([
        {scheme: "app", privileges: expect.objectContaining({standard: true, secure: true, supportFetchAPI: true})}
    ]);
});
