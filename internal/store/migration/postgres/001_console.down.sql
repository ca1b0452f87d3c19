-- Undoes 001_console.up.sql. Nothing runs it automatically: whoever runs it
-- by hand also deletes the row (line 'console', version 1) of
-- unstuck_migration.
DROP TABLE IF EXISTS sessions;
DROP TABLE IF EXISTS unstuck_console_user;
