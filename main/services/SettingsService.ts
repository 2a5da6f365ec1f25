import type {AppSettings} from "../../preload/contract.js";
import type {AppDatabase} from "../db/AppDatabase.js";
import {assertBudgetWithinCap, budgetChanged, type CapModel} from "../kv/budgetCap.js";
import {appSettingsSchema, defaultAppSettings, defaultConversationSettings, mergeConversationSettings} from "./schemas.js";

const key = "app";

export class SettingsService {
    private readonly _listeners = new Set<(settings: AppSettings) => void>();

    /** `loadedModel`: the model a new default budget is checked against (`budgetCap`); none, nothing to check. */
    constructor(
        private readonly _db: AppDatabase,
        private readonly _loadedModel: () => CapModel | null = () => null
    ) {}

    get(): AppSettings {
        const stored = (this._db.settings.get(key) ?? {}) as Partial<AppSettings>;
        const merged = {
            ...defaultAppSettings,
            ...stored,
            defaultConversationSettings: mergeConversationSettings(defaultConversationSettings, stored.defaultConversationSettings)
        };
        const parsed = appSettingsSchema.safeParse(merged);
        if (parsed.success) return parsed.data;
        // Damaged presets lose only themselves.
        const presets = appSettingsSchema.shape.samplingPresets.safeParse(merged.samplingPresets);
        const retried = appSettingsSchema.safeParse({...merged, samplingPresets: presets.success ? presets.data : []});
        return retried.success ? retried.data : defaultAppSettings;
    }

    /**
     * Whether the default compression is another than Ponder's own (Save as default); until then new conversations may start
     * under the model's own (every update stores the whole settings, so what is stored does not tell a saved choice apart).
     */
    savedCompression(): boolean {
        return (
            JSON.stringify(this.get().defaultConversationSettings.compression) !== JSON.stringify(defaultConversationSettings.compression)
        );
    }

    update(patch: Partial<AppSettings>): AppSettings {
        const current = this.get();
        const next = appSettingsSchema.parse({...current, ...patch});
        const compression = next.defaultConversationSettings.compression;
        if (budgetChanged(current.defaultConversationSettings.compression, compression))
            assertBudgetWithinCap(this._loadedModel(), compression);
        this._db.settings.set(key, next);
        for (const listener of this._listeners) listener(next);
        return next;
    }

    /** Calls `listener` with the settings after each update; returns what removes it. */
    onUpdate(listener: (settings: AppSettings) => void): () => void {
        this._listeners.add(listener);
        return () => void this._listeners.delete(listener);
    }
}
