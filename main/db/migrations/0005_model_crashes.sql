-- When loading a model stopped the engine process (a llama.cpp abort, a crash, out of memory): such a model is not
-- loaded again by itself (at start-up or on the engine's restart) until a person loads it and it works.
ALTER TABLE models ADD COLUMN crashed_at INTEGER;
