-- The indexes the console's read model of the saga engine's records needs
-- (the "console_operations" line). Runs after the saga driver's "saga"
-- line, which creates the tables. The console never writes these tables;
-- the indexes only serve its lists, counts and detail pages.
--
-- Timestamps of the saga tables are INTEGER Unix microseconds, UTC.

-- Lists of every status, newest change first, paged by (updated_at, id).
CREATE INDEX IF NOT EXISTS unstuck_console_saga_operation_updated_idx ON unstuck_saga_operation (updated_at, id);
-- Lists of one status, counts and oldest per status, review_required first.
CREATE INDEX IF NOT EXISTS unstuck_console_saga_operation_status_idx ON unstuck_saga_operation (status, updated_at, id);
-- Lists of one operation type.
CREATE INDEX IF NOT EXISTS unstuck_console_saga_operation_type_idx ON unstuck_saga_operation (type, updated_at, id);
-- Finding an operation by a step's external ID.
CREATE INDEX IF NOT EXISTS unstuck_console_saga_step_external_idx ON unstuck_saga_step (external_id)
    WHERE external_id <> '';
-- An operation's findings, open or resolved.
CREATE INDEX IF NOT EXISTS unstuck_console_saga_finding_operation_idx ON unstuck_saga_finding (operation_id, id);
