DROP INDEX IF EXISTS unstuck_saga_finding_operation_idx;
ALTER TABLE unstuck_saga_finding DROP COLUMN IF EXISTS supersedes;
ALTER TABLE unstuck_saga_finding DROP COLUMN IF EXISTS resolved_by;
ALTER TABLE unstuck_saga_finding DROP COLUMN IF EXISTS fingerprint;
