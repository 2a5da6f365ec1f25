-- A streaming answer is saved as parts appended every few hundred milliseconds, each with what was produced since the
-- one before and the answer's counters at that moment: a save writes the new text only, never the answer again. The
-- parts are joined into the message when it stops streaming (or, after a crash, at the next start).
CREATE TABLE message_parts (
    message_id TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    text TEXT NOT NULL,
    thinking TEXT NOT NULL,
    thinking_tokens INTEGER NOT NULL,
    answer_tokens INTEGER NOT NULL,
    thinking_ms INTEGER NOT NULL,
    total_ms INTEGER NOT NULL,
    first_token_ms INTEGER,
    PRIMARY KEY (message_id, seq)
);
