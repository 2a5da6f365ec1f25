import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type {Browser, Page} from "playwright-core";
import {afterAll, beforeAll} from "vitest";
import {launchChromium} from "./browser.js";
import {openApp, type ChatPage} from "./ChatPage.js";
import {HeadlessPonder, type HeadlessOptions} from "./HeadlessPonder.js";

/** Where the e2e tests leave their screenshots. */
export const artifacts = path.resolve(import.meta.dirname, "../../test-results/e2e");

export type BackendOptions = Omit<HeadlessOptions, "dataDir">;

export type OpenOptions = {
    /** The window's size. Defaults to 1280 x 860. */
    viewport?: {width: number; height: number};
    /** Console errors count as the page's errors, as uncaught exceptions always do. Defaults to `false`. */
    consoleErrors?: boolean;
    /** Waits until the status bar says the engine is ready. Defaults to `false`. */
    ready?: boolean;
};

/** The app under test: its data directory, the headless backend on it, and Chromium to open it in. */
export type AppFixture = {
    readonly dataDir: string;
    readonly browser: Browser;
    /** The running backend; a test that needs one before `start` fails with a clear message. */
    readonly backend: HeadlessPonder;
    /** Starts the backend on the data directory, stopping the one running first. */
    start(options?: BackendOptions): Promise<HeadlessPonder>;
    /** A new page on the running backend, with the errors it raised collected. */
    open(options?: OpenOptions): Promise<{page: Page; chat: ChatPage; errors: string[]}>;
    /** The path of a screenshot or other file the test leaves for a person to look at. */
    artifact(file: string): string;
};

/**
 * The set-up every e2e file shares: a data directory of its own (`ponder-e2e-<name>-`), Chromium, and the backend
 * (started before the tests when `backend` is given, or by a test with `start`), all torn down after the file.
 * Call it at the top of a file or a `describe`.
 */
export function useApp(name: string, options: {backend?: () => Promise<BackendOptions>} = {}): AppFixture {
    let dataDir: string | null = null;
    let browser: Browser | null = null;
    let backend: HeadlessPonder | null = null;

    beforeAll(async () => {
        fs.mkdirSync(artifacts, {recursive: true});
        dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `ponder-e2e-${name}-`));
        if (options.backend != null) backend = await HeadlessPonder.start({...(await options.backend()), dataDir});
        browser = await launchChromium();
    });
    afterAll(async () => {
        await backend?.stop();
        await browser?.close();
        if (dataDir != null) fs.rmSync(dataDir, {recursive: true, force: true});
    });

    const fixture: AppFixture = {
        get dataDir() {
            return need(dataDir, "the data directory");
        },
        get browser() {
            return need(browser, "Chromium");
        },
        get backend() {
            return need(backend, "a backend (call start first)");
        },
        async start(backendOptions = {}) {
            await backend?.stop();
            backend = null;
            backend = await HeadlessPonder.start({...backendOptions, dataDir: fixture.dataDir});
            return backend;
        },
        async open(openOptions = {}) {
            const opened = await openApp(fixture.browser, fixture.backend.url, openOptions);
            if (openOptions.ready === true) await opened.chat.byId("engine-state").filter({hasText: /ready/i}).waitFor();
            return opened;
        },
        artifact(file) {
            return path.join(artifacts, file);
        }
    };
    return fixture;
}

function need<T>(value: T | null, what: string): T {
    if (value == null) throw new Error(`The e2e app fixture has no ${what} here: useApp's beforeAll has not run, or it failed.`);
    return value;
}
