-- The indexes the admin reads (sagadriver.Admin: the console's lists,
-- counts and detail) need. Until this migration the console's own
-- "console_operations" line made them under these names; IF NOT EXISTS
-- keeps a database it migrated as it is, and its old bookkeeping row
-- stays, unread.
--
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
