-- The compression each answer ran under, as JSON: its policy, the live cells its budget allowed, and every compression
-- setting as it started (the budget as set, cache type, parameters), so answers made under different policies can be
-- told apart and compared. Written when the answer starts, so an interrupted one keeps it too. Answers from before
-- this get what their stats knew (policy and cells).
ALTER TABLE messages ADD COLUMN compression TEXT;

UPDATE messages
SET compression = json_object('policy', json_extract(stats, '$.policy'), 'budgetCells', json_extract(stats, '$.budgetCells'), 'settings', NULL)
WHERE role = 'assistant' AND json_valid(stats) AND json_type(stats, '$.policy') = 'text' AND json_type(stats, '$.budgetCells') = 'integer';
