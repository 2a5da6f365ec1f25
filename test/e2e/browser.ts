import fs from "node:fs";
import {chromium, type Browser} from "playwright-core";

const chromiumPath = process.env.PONDER_CHROMIUM ?? "/usr/bin/chromium";

/** Debian's Chromium, headless, with the flags this sandbox needs (no background networking). */
export async function launchChromium(): Promise<Browser> {
    if (!fs.existsSync(chromiumPath))
        throw new Error(`No Chromium at ${chromiumPath}: install Debian's chromium (apt-get install chromium) or set PONDER_CHROMIUM`);
    return chromium.launch({
        executablePath: chromiumPath,
        headless: true,
        args: [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-quic"
        ]
    });
}
