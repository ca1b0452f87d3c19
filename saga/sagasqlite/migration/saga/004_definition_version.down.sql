ALTER TABLE unstuck_saga_operation DROP COLUMN definition_version;
