-- An answer cut short by its token limit says so: the reason, kept until a continuation finishes it.
ALTER TABLE messages ADD COLUMN cut_reason TEXT CHECK (cut_reason IN ('max_tokens'));
