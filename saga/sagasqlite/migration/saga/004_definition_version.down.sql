ALTER TABLE unstuck_saga_step DROP COLUMN verifiable;
ALTER TABLE unstuck_saga_step DROP COLUMN unkeyed;
ALTER TABLE unstuck_saga_operation DROP COLUMN definition_version;
