-- Frozen sets, canary and pause of bulk requests (SPEC K22, K23); see the
-- PostgreSQL line's 008_bulk_freeze.
ALTER TABLE unstuck_console_bulk ADD COLUMN summary TEXT NOT NULL DEFAULT '';
ALTER TABLE unstuck_console_bulk ADD COLUMN canary INTEGER NOT NULL DEFAULT 0;
ALTER TABLE unstuck_console_bulk ADD COLUMN paused_by TEXT NOT NULL DEFAULT '';
ALTER TABLE unstuck_console_bulk ADD COLUMN paused_reason TEXT NOT NULL DEFAULT '';
CREATE INDEX unstuck_console_bulk_item_target ON unstuck_console_bulk_item (target_id, bulk_id);
