DROP INDEX IF EXISTS unstuck_console_bulk_item_target;
ALTER TABLE unstuck_console_bulk DROP COLUMN summary;
ALTER TABLE unstuck_console_bulk DROP COLUMN canary;
ALTER TABLE unstuck_console_bulk DROP COLUMN paused_by;
ALTER TABLE unstuck_console_bulk DROP COLUMN paused_reason;
