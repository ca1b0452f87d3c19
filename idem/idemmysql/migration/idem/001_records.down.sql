-- Reverts 001_records.up.sql. The migrator only applies up migrations; a
-- tool that runs this file also removes the ('idem', 1) row of
-- unstuck_migration.
DROP TABLE IF EXISTS unstuck_idem_fence;
DROP TABLE IF EXISTS unstuck_idem_record;
