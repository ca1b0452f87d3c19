-- Reverts 010_api_token.up.sql; whoever runs it also deletes the
-- ('console', 10) row of unstuck_migration.
DROP TABLE unstuck_console_api_token;
