-- Undoes 001_operations.up.sql. Nothing runs it automatically: whoever runs
-- it by hand also deletes the row (line 'console_operations', version 1) of
-- unstuck_migration.
DROP INDEX IF EXISTS unstuck_console_saga_finding_operation_idx;
DROP INDEX IF EXISTS unstuck_console_saga_step_external_idx;
DROP INDEX IF EXISTS unstuck_console_saga_operation_type_idx;
DROP INDEX IF EXISTS unstuck_console_saga_operation_status_idx;
DROP INDEX IF EXISTS unstuck_console_saga_operation_updated_idx;
