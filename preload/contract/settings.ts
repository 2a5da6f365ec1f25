// The app's settings.

import type {ConversationSettings, SamplingPreset} from "./conversations.js";

export type AppSettings = {
    theme: "system" | "light" | "dark";
    defaultModelId: string | null;
    defaultConversationSettings: ConversationSettings;
    /** Sampling presets the user saved, by name. */
    samplingPresets: SamplingPreset[];
    /**
     * Disk budget of the conversations' saved KV states (resume without reading the history again), in MiB; the oldest
     * go first past it, and `0` saves none. Defaults to `4096` (4 GiB).
     */
    stateDiskBudgetMib: number;
};
