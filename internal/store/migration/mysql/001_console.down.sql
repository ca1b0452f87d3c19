-- Reverts 001_console.up.sql; whoever runs it also deletes the
-- ('console', 1) row of unstuck_migration.
DROP TABLE IF EXISTS unstuck_console_bulk_item;
DROP TABLE IF EXISTS unstuck_console_bulk;
DROP TABLE IF EXISTS sessions;
DROP TABLE IF EXISTS unstuck_console_user;
