-- Reverts 001_audit.up.sql; whoever runs it also deletes the ('audit', 1)
-- row of unstuck_migration.
DROP TABLE IF EXISTS unstuck_audit_lock;
DROP TABLE IF EXISTS unstuck_audit_entry;
