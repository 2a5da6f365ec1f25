import type {TokenCount} from "../../preload/contract.js";
import {AppError} from "../AppError.js";
import type {AppDatabase} from "../db/AppDatabase.js";
import type {EngineApi} from "../engine/EngineApi.js";
import {toTurn} from "./toTurn.js";
import type {CompressionService} from "./CompressionService.js";
import type {ConversationService} from "./ConversationService.js";
import type {SettingsService} from "./SettingsService.js";

/** The longest text counted: 4 MiB of characters (a message sends at most 200,000). */
export const maxCountChars = 4 * 1024 * 1024;

/**
 * Counts a message before it is sent (the composer's budget hint): what it adds to the conversation's prompt and the
 * whole prompt, with the loaded model's tokenizer, against the KV budget the conversation's next answer runs under.
 */
export class TokenCountService {
    constructor(
        private readonly _db: AppDatabase,
        private readonly _engine: EngineApi,
        private readonly _conversations: ConversationService,
        private readonly _settings: SettingsService,
        private readonly _compression: CompressionService
    ) {}

    /**
     * `conversationId` absent: a new conversation, with the default settings and no history. `null` when no model is
     * loaded (or it went away meanwhile): nothing to count with, and nothing is wrong.
     */
    async count(conversationId: string | undefined, text: string): Promise<TokenCount | null> {
        if (this._engine.inspection == null) return null;
        const conversation = conversationId != null ? this._conversations.require(conversationId) : null;
        const settings =
            conversation != null ? this._conversations.settingsOf(conversation) : this._settings.get().defaultConversationSettings;
        const earlier = conversation != null ? this._db.messages.listByConversation(conversation.id).flatMap(toTurn) : [];
        try {
            const counted = await this._engine.countTokens({
                history: [...earlier, {role: "user", text}],
                systemPrompt: settings.systemPrompt,
                thinking: settings.thinking
            });
            if (counted == null) return null;
            // The cells the answer would run with, resolved as ChatService resolves them (auto included).
            const {cells} = await this._compression.estimate(settings.compression);
            return {...counted, policy: settings.compression.policy, budgetCells: cells};
        } catch (err) {
            if (err instanceof AppError && err.code === "MODEL_NOT_LOADED") return null;
            throw err;
        }
    }
}
