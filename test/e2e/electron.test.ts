import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {createRequire} from "node:module";
import {_electron as electron} from "playwright-core";
import {describe, expect, it} from "vitest";

// The real desktop app, driven by Playwright's Electron support. It needs Electron's binary, which
// cannot be downloaded on every machine (ours among them): there it says so and skips.
function electronBinary(): string | null {
    // Read where the binary would be rather than require("electron"), which tries to download a missing one.
    try {
        const packageDir = path.dirname(createRequire(import.meta.url).resolve("electron/package.json"));
        const relative = fs.readFileSync(path.join(packageDir, "path.txt"), "utf8");
        const binary = path.join(process.env.ELECTRON_OVERRIDE_DIST_PATH ?? path.join(packageDir, "dist"), relative);
        return fs.existsSync(binary) ? binary : null;
    } catch {
        return null;
    }
}

const binary = electronBinary();
if (binary == null)
    console.warn(
        "SKIPPED: the Electron end-to-end spec needs Electron's binary (run `npx install-electron` where downloads work); it is not installed here."
    );

describe.skipIf(binary == null)("the Electron app", () => {
    it("opens a secure window that lists conversations and refuses navigation", async () => {
        const userData = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-electron-"));
        const app = await electron.launch({
            executablePath: binary!,
            args: [path.resolve(import.meta.dirname, "../.."), `--user-data-dir=${userData}`, "--no-sandbox"]
        });
        try {
            const page = await app.firstWindow();
            await page.getByTestId("status-bar").waitFor();
            await page.getByTestId("new-conversation").click();
            await page.getByTestId("conversation-item").first().waitFor();
            expect(await page.evaluate(() => typeof (window as unknown as {require?: unknown}).require)).toBe("undefined");
            expect(await page.evaluate(() => typeof (window as unknown as {ponder?: unknown}).ponder)).toBe("object");
            // served from the privileged app:// scheme, not file://; the copy buttons' clipboard write is granted
            expect(page.url()).toBe("app://ponder/index.html");
            await page.evaluate(() => navigator.clipboard.writeText("copied by Ponder"));
            expect(await app.evaluate(({clipboard}) => clipboard.readText())).toBe("copied by Ponder");
            const before = page.url();
            await page.evaluate(() => {
                window.location.href = "https://example.com/";
            });
            await page.waitForTimeout(500);
            expect(page.url()).toBe(before);
        } finally {
            await app.close();
            fs.rmSync(userData, {recursive: true, force: true});
        }
    });
});
