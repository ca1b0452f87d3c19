-- Drops the audit trail and everything in it. The triggers do not stop
-- DROP TABLE; only the grants (package audit's doc) do.
DROP TABLE IF EXISTS unstuck_audit_entry;
DROP FUNCTION IF EXISTS unstuck_audit_entry_append_only();
