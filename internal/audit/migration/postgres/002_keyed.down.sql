-- Back to the unkeyed chain: checkpoints and key IDs are dropped, and keyed
-- entries no longer verify.
DROP TABLE IF EXISTS unstuck_audit_checkpoint;
DROP TRIGGER IF EXISTS unstuck_audit_entry_keyed ON unstuck_audit_entry;
DROP FUNCTION IF EXISTS unstuck_audit_entry_keyed();
ALTER TABLE unstuck_audit_entry DROP COLUMN IF EXISTS key_id;
