DROP INDEX IF EXISTS unstuck_saga_finding_operation_idx;
ALTER TABLE unstuck_saga_finding DROP COLUMN supersedes;
ALTER TABLE unstuck_saga_finding DROP COLUMN resolved_by;
ALTER TABLE unstuck_saga_finding DROP COLUMN fingerprint;
