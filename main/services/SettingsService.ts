import type {AppSettings} from "../../preload/contract.js";
import type {AppDatabase} from "../db/AppDatabase.js";
import {appSettingsSchema, defaultAppSettings, defaultConversationSettings, mergeConversationSettings} from "./schemas.js";

const key = "app";

export class SettingsService {
    constructor(private readonly _db: AppDatabase) {}

    get(): AppSettings {
        const stored = (this._db.settings.get(key) ?? {}) as Partial<AppSettings>;
        const merged = {
            ...defaultAppSettings,
            ...stored,
            defaultConversationSettings: mergeConversationSettings(defaultConversationSettings, stored.defaultConversationSettings)
        };
        const parsed = appSettingsSchema.safeParse(merged);
        if (parsed.success)
            return parsed.data;
        // Damaged presets lose only themselves.
        const presets = appSettingsSchema.shape.samplingPresets.safeParse(merged.samplingPresets);
        const retried = appSettingsSchema.safeParse({...merged, samplingPresets: presets.success ? presets.data : []});
        return retried.success ? retried.data : defaultAppSettings;
    }

    update(patch: Partial<AppSettings>): AppSettings {
        const next = appSettingsSchema.parse({...this.get(), ...patch});
        this._db.settings.set(key, next);
        return next;
    }
}
