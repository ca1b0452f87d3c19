-- Reverts 006_incident.up.sql; whoever runs it also deletes the
-- ('console', 6) row of unstuck_migration.
DROP TABLE IF EXISTS unstuck_console_incident_hour;
DROP TABLE IF EXISTS unstuck_console_incident;
DROP TABLE IF EXISTS unstuck_console_trend;
