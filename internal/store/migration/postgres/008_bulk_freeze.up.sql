-- Frozen sets, canary and pause of bulk requests (SPEC K22, K23). A
-- request is frozen when it is previewed: status 'draft', its items the
-- exact set the preview showed, and summary (JSON: the breakdown by state,
-- operation and scope, the items left out and why, a sample) what the
-- approver reads. canary is the size of the run's first batch; a run that
-- crosses the failure threshold, or a person, pauses it: paused_by and
-- paused_reason say who and why until it resumes. The target index finds
-- the request that already decided an item another request also holds.
ALTER TABLE unstuck_console_bulk
    ADD COLUMN summary       TEXT    NOT NULL DEFAULT '',
    ADD COLUMN canary        INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN paused_by     TEXT    NOT NULL DEFAULT '',
    ADD COLUMN paused_reason TEXT    NOT NULL DEFAULT '';
CREATE INDEX unstuck_console_bulk_item_target ON unstuck_console_bulk_item (target_id, bulk_id);
