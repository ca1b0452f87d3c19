-- Reverts 011_webhook.up.sql; whoever runs it also deletes the
-- ('console', 11) row of unstuck_migration.
DROP TABLE IF EXISTS unstuck_console_webhook_delivery;
DROP TABLE IF EXISTS unstuck_console_webhook_cursor;
