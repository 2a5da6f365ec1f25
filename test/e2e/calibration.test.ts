// Retention calibration as a person does it (README, "Retention gates for your model"): a copy of the demo model
// without its gates, "Calibrate retention" in its details pressed from the keyboard, the progress bar with its stage
// and time left, Cancel, a second press that goes on from the prompts thought before, and the card with the result in
// numbers (or, when the gates did worse than Lethe, the refusal in numbers). Small settings: 12 prompts of at most 1,000
// tokens, 1 held-out prompt, 8 epochs, the default four candidates.
import fs from "node:fs";
import path from "node:path";
import {expect, it} from "vitest";
import {useApp} from "./appFixture.js";

const demoModel = path.resolve(import.meta.dirname, "../../resources/models/ponder-demo.gguf");
const app = useApp("calibration");

it("calibrates a model without gates from its details, cancels, goes on, and shows the result in numbers", async () => {
    const model = path.join(app.dataDir, "copy", "ponder-demo.gguf");
    fs.mkdirSync(path.dirname(model));
    fs.copyFileSync(demoModel, model);
    await app.start({model, seed: 7, calibration: {prompts: 12, validationPrompts: 1, maxTokens: 1000, epochs: 8}});
    const {page, chat, errors} = await app.open({viewport: {width: 1400, height: 900}});
    await chat.byId("engine-state").filter({hasText: /ready/i}).waitFor({timeout: 60_000});
    await chat.newConversation();
    await chat.byId("memory-button").click();
    await chat.byId("budget-controller").waitFor();
    await expect.poll(() => chat.byId("policy-select").locator("option[value=trimkv]").isDisabled()).toBe(true);

    await chat.byId("model-details-button").click();
    await chat.byId("model-details").waitFor();
    await expect.poll(() => chat.byId("model-retention").textContent(), {timeout: 15_000}).toMatch(/TRIM-KV unavailable/);
    // No conversation with this copy yet: calibrating from conversations says what it needs and waits.
    await expect
        .poll(() => chat.byId("model-calibrate-conversations-note").textContent(), {timeout: 15_000})
        .toMatch(/No conversation with this model yet: at least 4 are needed/);
    expect(await chat.byId("model-calibrate-conversations-button").isDisabled()).toBe(true);
    // The button is reached from the keyboard.
    await chat.byId("model-calibrate-button").focus();
    await page.keyboard.press("Enter");
    const progress = chat.byId("model-calibration-progress");
    await expect.poll(() => progress.textContent(), {timeout: 60_000}).toMatch(/Thinking ([2-9]|1[0-2])\/12 · about \d+ (s|min) left/);
    expect(await chat.byId("model-calibration").getByRole("progressbar").getAttribute("aria-valuenow")).toMatch(/^\d+$/);
    expect(await chat.byId("model-calibration").textContent()).toMatch(/Answers wait until the calibration ends/);
    await page.screenshot({path: app.artifact("calibration-progress.png")});
    await chat.byId("model-calibration-cancel").click();
    await expect.poll(() => chat.byId("model-calibration-ended").textContent(), {timeout: 60_000}).toMatch(/Cancelled/);

    // Again: the prompts thought before are kept.
    await chat.byId("model-calibrate-button").click();
    await expect
        .poll(() => chat.byId("model-calibration").textContent(), {timeout: 60_000})
        .toMatch(/went on from \d+ prompts? thought before|Calibrated on/);
    const installed = chat.byId("model-calibration-card");
    const refused = chat.byId("model-calibration-result");
    // four candidates (two read thresholds, two weights) are trained and validated
    await installed.or(refused).waitFor({timeout: 300_000});
    await page.screenshot({path: app.artifact("calibration-result.png")});
    const numbers =
        /Calibrated on 12 thoughts \(on its task's problems\), [\d,]+ tokens, texts of [\d,]+ tokens on average \(longest [\d,]+(; \d+ cut at the limit)?\), \d+ (s|min); held-out agreement at 25%: \d\.\d\d, Lethe \d\.\d\d \(answers \d\.\d\d, Lethe \d\.\d\d\); at 50%: \d\.\d\d, Lethe \d\.\d\d \(answers \d\.\d\d, Lethe \d\.\d\d\)/;
    if ((await installed.count()) > 0) {
        expect(await installed.textContent()).toMatch(numbers);
        expect(await chat.byId("model-retention").textContent()).toMatch(/✓ TRIM-KV gates/);
        expect(fs.existsSync(model.replace(/\.gguf$/, ".retention.gguf"))).toBe(true);
        // TRIM-KV is offered in the budget controller from now on.
        await expect.poll(() => chat.byId("policy-select").locator("option[value=trimkv]").isDisabled(), {timeout: 15_000}).toBe(false);
    } else {
        expect(await refused.textContent()).toMatch(/Not installed: the calibrated gates did worse than Lethe/);
        expect(await refused.textContent()).toMatch(numbers);
        expect(fs.existsSync(model.replace(/\.gguf$/, ".retention.gguf"))).toBe(false);
    }
    expect(errors).toEqual([]);
}, 480_000);
