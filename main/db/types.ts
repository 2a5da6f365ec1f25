/** A forward-only migration: its number, its name and the SQL it runs in one transaction. */
export type Migration = {id: number; name: string; sql: string};

export type ModelRow = {
    id: string;
    path: string;
    name: string;
    size_bytes: number;
    architecture: string | null;
    context_length: number | null;
    metadata: string;
    /** `auto`, `max` or a whole number, as text. */
    gpu_layers: string;
    added_at: number;
    last_used_at: number | null;
    /** When loading it last stopped the engine; cleared by a load that works. Absent before it is first set. */
    crashed_at?: number | null;
};

export type ConversationRow = {
    id: string;
    title: string;
    settings: string;
    model_id: string | null;
    created_at: number;
    updated_at: number;
    message_count: number;
    /** The last message of the path the conversation shows. */
    leaf_id: string | null;
};

export type MessageRow = {
    id: string;
    conversation_id: string;
    seq: number;
    role: "user" | "assistant";
    text: string;
    thinking: string;
    status: "complete" | "streaming" | "interrupted" | "stopped" | "error";
    prompt_tokens: number;
    thinking_tokens: number;
    answer_tokens: number;
    thinking_ms: number;
    total_ms: number;
    error: string | null;
    stats: string;
    /** `max_tokens`: the answer reached its token limit before it ended (it can be continued). */
    cut_reason: "max_tokens" | null;
    /** Tokens generated when it was cut (the max tokens limit, plus what earlier continuations generated). */
    cut_tokens: number | null;
    /** Milliseconds from the request to the first generated token; `null` before it. */
    first_token_ms: number | null;
    /** The message this one follows; `null` for a conversation's first message. Siblings are versions. */
    parent_id: string | null;
    /** The child shown last (the version of the next message last viewed on this path); `null` before any. */
    shown_child_id: string | null;
    /** The model file that wrote an answer; `null` for questions and for answers from before it was recorded. */
    model_path: string | null;
    /** The compression an answer ran under, as JSON (`MessageCompression`); `null` for questions and older answers. */
    compression?: string | null;
    created_at: number;
    updated_at: number;
};
