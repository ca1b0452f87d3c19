-- Drops the audit trail and everything in it (with its triggers).
DROP TABLE IF EXISTS unstuck_audit_entry;
