-- An operation records the version of its definition it runs (SPEC G13):
-- a redrive may move it to a compatible newer version. Operations started
-- before this column existed ran version 1.
ALTER TABLE unstuck_saga_operation ADD COLUMN definition_version integer NOT NULL DEFAULT 1;
-- What a redrive needs to know of a step without its definition (a console
-- in its own process has none): whether Do passes no key to its system
-- (a repeat makes a second effect) and whether it has a Verify.
ALTER TABLE unstuck_saga_step ADD COLUMN unkeyed boolean NOT NULL DEFAULT false;
ALTER TABLE unstuck_saga_step ADD COLUMN verifiable boolean NOT NULL DEFAULT false;
