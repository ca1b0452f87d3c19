-- Frozen sets, canary and pause of bulk requests (SPEC K22, K23) on MySQL
-- 8 or MariaDB 10.6+; see the PostgreSQL line's 008_bulk_freeze. Safe to
-- run again: a column or index already there is work done.
ALTER TABLE unstuck_console_bulk ADD COLUMN summary MEDIUMTEXT NOT NULL DEFAULT ('');
ALTER TABLE unstuck_console_bulk ADD COLUMN canary INT NOT NULL DEFAULT 0;
ALTER TABLE unstuck_console_bulk ADD COLUMN paused_by VARCHAR(255) NOT NULL DEFAULT '';
ALTER TABLE unstuck_console_bulk ADD COLUMN paused_reason TEXT NOT NULL DEFAULT ('');
CREATE INDEX unstuck_console_bulk_item_target ON unstuck_console_bulk_item (target_id, bulk_id);
