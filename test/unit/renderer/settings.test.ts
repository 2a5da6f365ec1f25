import {describe, expect, test} from "vitest";
import {createSettings} from "../../../renderer/state/settings.svelte.js";
import {createFakeBridge, conversationSettings} from "./fakeBridge.js";

describe("settings state", () => {
    test("the theme applies at once and reverts when it cannot be saved", async () => {
        const bridge = createFakeBridge();
        const defaults = conversationSettings();
        bridge.reply("settings:get", {
            theme: "dark",
            defaultModelId: null,
            defaultConversationSettings: defaults,
            samplingPresets: [],
            stateDiskBudgetMib: 4096
        });
        const settings = createSettings(bridge.api);
        await settings.load();
        expect(settings.state.theme).toBe("dark");

        bridge.handle("settings:update", ({theme}) => ({
            ok: true,
            value: {
                theme: theme ?? "system",
                defaultModelId: null,
                defaultConversationSettings: defaults,
                samplingPresets: [],
                stateDiskBudgetMib: 4096
            }
        }));
        await settings.setTheme("light");
        expect(settings.state.theme).toBe("light");

        bridge.fail("settings:update", "STORAGE", "disk full");
        await settings.setTheme("system");
        expect(settings.state.theme).toBe("light");
        expect(settings.state.error).toBe("Could not save the theme: disk full");
    });
});
