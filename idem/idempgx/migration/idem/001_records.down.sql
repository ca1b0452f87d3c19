-- Undoes 001_records.up.sql. Nothing runs it automatically: whoever runs it
-- by hand also deletes the row (line 'idem', version 1) of unstuck_migration.
DROP TABLE IF EXISTS unstuck_idem_record;
DROP SEQUENCE IF EXISTS unstuck_idem_fence_seq;
