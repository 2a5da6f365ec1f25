-- The model file that wrote each answer (its path; NULL for questions, and for answers from before this was recorded),
-- so that a model's own conversations can be told apart from other models' (a calibration that reads them).
ALTER TABLE messages ADD COLUMN model_path TEXT;
CREATE INDEX messages_model_path ON messages(model_path) WHERE model_path IS NOT NULL;
