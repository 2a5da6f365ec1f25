-- Each message remembers which of its children (the versions of the next message) was shown last, so switching back
-- to a version shows the path last viewed below it, not the newest one. Kept up to date whenever the shown path changes.
ALTER TABLE messages ADD COLUMN shown_child_id TEXT REFERENCES messages(id) ON DELETE SET NULL;

WITH RECURSIVE path(id, parent_id) AS (
    SELECT m.id, m.parent_id FROM conversations c JOIN messages m ON m.id = c.leaf_id
    UNION ALL
    SELECT m.id, m.parent_id FROM messages m JOIN path ON m.id = path.parent_id
)
UPDATE messages SET shown_child_id = (SELECT path.id FROM path WHERE path.parent_id = messages.id)
WHERE id IN (SELECT parent_id FROM path WHERE parent_id IS NOT NULL);
