-- Reverts 002_keyed.up.sql; whoever runs it also deletes the ('audit', 2)
-- row of unstuck_migration.
DROP TABLE IF EXISTS unstuck_audit_checkpoint;
DROP TRIGGER IF EXISTS unstuck_audit_entry_keyed;
ALTER TABLE unstuck_audit_entry DROP COLUMN key_id;
