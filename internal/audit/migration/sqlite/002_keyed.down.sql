-- Back to the unkeyed chain: checkpoints and key IDs are dropped.
DROP TABLE IF EXISTS unstuck_audit_checkpoint;
DROP TRIGGER IF EXISTS unstuck_audit_entry_keyed;
ALTER TABLE unstuck_audit_entry DROP COLUMN key_id;
