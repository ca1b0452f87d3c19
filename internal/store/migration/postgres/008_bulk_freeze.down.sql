DROP INDEX IF EXISTS unstuck_console_bulk_item_target;
ALTER TABLE unstuck_console_bulk
    DROP COLUMN IF EXISTS summary,
    DROP COLUMN IF EXISTS canary,
    DROP COLUMN IF EXISTS paused_by,
    DROP COLUMN IF EXISTS paused_reason;
