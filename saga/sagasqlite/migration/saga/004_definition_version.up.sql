-- An operation records the version of its definition it runs (SPEC G13):
-- a redrive may move it to a compatible newer version. Operations started
-- before this column existed ran version 1.
ALTER TABLE unstuck_saga_operation ADD COLUMN definition_version INTEGER NOT NULL DEFAULT 1;
