import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import type {AddressInfo} from "node:net";
import type {Page} from "playwright-core";
import {describe, expect, it} from "vitest";
import {getFixtureModel} from "../fixtures/gguf/fixtures.js";
import {useApp} from "./appFixture.js";
import type {ChatPage} from "./ChatPage.js";

/** Serves one file over loopback with Range support, as a model host would. */
async function serveFile(file: string): Promise<{url: string; close(): Promise<void>; requests: number}> {
    const body = fs.readFileSync(file);
    const state = {requests: 0};
    const server = http.createServer((req, res) => {
        state.requests++;
        const range = /bytes=(\d+)-(\d*)/.exec(req.headers.range ?? "");
        const headers = {"content-type": "application/octet-stream", "accept-ranges": "bytes"};
        if (range != null) {
            const start = Number(range[1]);
            const end = range[2] !== "" ? Number(range[2]) : body.length - 1;
            res.writeHead(206, {...headers, "content-length": end - start + 1, "content-range": `bytes ${start}-${end}/${body.length}`});
            res.end(req.method === "HEAD" ? undefined : body.subarray(start, end + 1));
            return;
        }
        res.writeHead(200, {...headers, "content-length": body.length});
        res.end(req.method === "HEAD" ? undefined : body);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as AddressInfo).port;
    return {
        url: `http://127.0.0.1:${port}/downloaded-model.gguf`,
        close: () => new Promise((resolve) => server.close(() => resolve())),
        get requests() {
            return state.requests;
        }
    };
}

describe("compression in the app", () => {
    const app = useApp("kv");

    async function open(): Promise<{page: Page; chat: ChatPage}> {
        return app.open({viewport: {width: 1400, height: 900}});
    }

    async function openPanel(chat: ChatPage): Promise<void> {
        if ((await chat.byId("budget-controller").count()) === 0) await chat.byId("memory-button").click();
        await chat.byId("budget-controller").waitFor();
    }

    it("sets a policy and budget, generates past the budget with the gauge and the remembered tokens live, and keeps it all after a reload", async () => {
        await app.start({model: await getFixtureModel("endless"), seed: 4});
        const {page, chat} = await open();
        await chat.byId("engine-state").filter({hasText: /ready/i}).waitFor();
        await chat.newConversation();
        await openPanel(chat);

        // An invalid budget is refused with a clear message, and nothing is applied.
        await chat.byId("budget-kind").selectOption("cells");
        await chat.byId("budget-value").fill("10");
        await chat.byId("budget-error").waitFor();
        expect(await chat.byId("budget-error").textContent()).toMatch(/64/);

        await chat.byId("policy-select").selectOption("lethe");
        await chat.byId("budget-value").fill("128");
        // The estimate follows the edit: what 128 cells mean for this model, before applying.
        // The budget's cells and llama.cpp's allocation (256-cell steps, which the bytes are of) are told apart.
        await page.waitForFunction(() =>
            /\b128 cells used of 256 allocated/.test(document.querySelector("[data-testid=budget-estimate]")?.textContent ?? "")
        );
        expect(await chat.byId("budget-estimate-cells").textContent()).toBe("128 cells used of 256 allocated");
        expect(await chat.byId("budget-estimate").textContent()).toMatch(/KiB\/token/);
        await chat.byId("apply-budget").click();
        await chat.byId("budget-controller").screenshot({path: app.artifact("controller.png")});

        await chat.send("Think about this for a long while");
        await chat.byId("thinking-block").first().waitFor();
        // Past 4 x the budget while the gauge updates live.
        await page.waitForFunction(
            () => {
                const stats = document.querySelector("[data-testid=thinking-stats]")?.textContent ?? "";
                return Number(/([\d,]+) tokens/.exec(stats)?.[1]?.replace(/,/g, "") ?? 0) >= 520;
            },
            undefined,
            {timeout: 120_000}
        );
        const liveSavings = await chat.byId("gauge-savings").textContent();
        expect(liveSavings).toMatch(/\d+/);
        await chat.byId("stop-button").click();
        await chat.waitForAnswerDone();

        const strip = chat.byId("remember-strip");
        expect(Number(await strip.getAttribute("data-tokens"))).toBeGreaterThan(500);
        expect(await strip.getAttribute("data-evicted")).toMatch(/^\d+,\d+/);
        const live = Number((await chat.byId("gauge-live").textContent())!.replace(/[^\d.]/g, ""));
        const full = Number((await chat.byId("gauge-full").textContent())!.replace(/[^\d.]/g, ""));
        expect(full).toBeGreaterThan(2 * live);
        expect(Number(/(\d+)\s*%/.exec((await chat.byId("gauge-savings").textContent())!)?.[1])).toBeGreaterThan(50);
        expect(await chat.byId("message-footprint").last().textContent()).toMatch(/\d+% less than a full cache/);
        expect(await chat.byId("message-compression").last().textContent()).toMatch(/Lethe · 128 cells/);
        await chat.byId("memory-gauge").screenshot({path: app.artifact("gauge.png")});
        await strip.screenshot({path: app.artifact("remember-strip.png")});
        await page.screenshot({path: app.artifact("memory-panel.png")});

        // Hovering a token says where it is, how old, and whether it is still in memory.
        const box = (await strip.boundingBox())!;
        await page.mouse.move(box.x + 2, box.y + box.height / 2);
        expect(await chat.byId("remember-readout").textContent()).toMatch(
            /^Token [\d,]+ of [\d,]+, in the prompt · [\d,]+ tokens old · (still in memory|forgotten \(evicted from memory\))$/
        );
        await page.mouse.move(0, 0);

        // Under Full KV nothing is evicted.
        await chat.newConversation();
        await openPanel(chat);
        await chat.byId("policy-select").selectOption("full");
        await chat.byId("budget-kind").selectOption("cells");
        await chat.byId("budget-value").fill("512");
        await chat.byId("apply-budget").click();
        await chat.send("A short question");
        await chat.byId("thinking-block").first().waitFor();
        await chat.byId("stop-button").click();
        await chat.waitForAnswerDone();
        // A short first message is read without a word about rebuilding anything.
        expect(await chat.byId("rebuild-progress").count()).toBe(0);
        // Full KV forgets nothing: every token stays solid, and there is no per-layer sparsity to show.
        await expect.poll(() => chat.byId("remember-strip").getAttribute("data-live")).toBe("false");
        expect(await chat.byId("remember-strip").getAttribute("data-evicted")).toBe("");
        expect(await chat.byId("sparsity-strip").count()).toBe(0);
        await page.screenshot({path: app.artifact("memory-panel-full.png")});

        await page.reload();
        await chat
            .conversationItems()
            .filter({hasText: /Think about this/})
            .click();
        await chat.byId("message-assistant").first().waitFor();
        await openPanel(chat);
        expect(await chat.byId("policy-select").inputValue()).toBe("lethe");
        expect(await chat.byId("budget-kind").inputValue()).toBe("cells");
        expect(await chat.byId("budget-value").inputValue()).toBe("128");
        expect(Number(await chat.byId("savings-chart").getAttribute("data-points"))).toBeGreaterThan(5);
        expect(await chat.byId("gauge-savings").textContent()).toMatch(/\d+\s*%/);
        await page.close();
    });

    it("downloads a model from a loopback server with progress and adds it", async () => {
        const source = await getFixtureModel("tiny-llama");
        const server = await serveFile(source);
        try {
            const {page, chat} = await open();
            await chat.byId("model-uri-input").fill(server.url);
            await chat.byId("model-download-button").click();
            await page.waitForFunction(
                () => document.querySelector("[data-testid=download-progress]")?.getAttribute("data-state") === "done",
                undefined,
                {timeout: 60_000}
            );
            expect(await chat.byId("download-progress").first().textContent()).toMatch(/100\s*%|done|Done/);
            // The finished download's bar is full and in the success colour; the progress bar is named for its file.
            const bar = page.getByRole("progressbar", {name: `Download of ${server.url}`}).locator(".bar");
            expect(await bar.getAttribute("class")).toMatch(/\bsuccess\b/);
            expect(await bar.evaluate((element) => (element as HTMLElement).style.width)).toBe("100%");
            await chat
                .byId("model-item")
                .filter({hasText: /downloaded-model|tiny-llama/})
                .first()
                .waitFor();
            expect(fs.readFileSync(path.join(app.dataDir, "models", "downloaded-model.gguf")).equals(fs.readFileSync(source))).toBe(true);
            expect(server.requests).toBeGreaterThan(0);
            await page.screenshot({path: app.artifact("download.png")});
            await page.close();
        } finally {
            await server.close();
        }
    });
});
