-- Undoes 003_admin_indexes.up.sql. Nothing runs it automatically: whoever
-- runs it by hand also deletes the row (line 'idem', version 3) of
-- unstuck_migration.
DROP INDEX IF EXISTS unstuck_console_idem_processing_scope_idx;
DROP INDEX IF EXISTS unstuck_console_idem_processing_idx;
DROP INDEX IF EXISTS unstuck_console_idem_operation_idx;
DROP INDEX IF EXISTS unstuck_console_idem_scope_idx;
DROP INDEX IF EXISTS unstuck_console_idem_updated_idx;
