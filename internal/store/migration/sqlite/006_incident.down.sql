DROP TABLE IF EXISTS unstuck_console_incident_hour;
DROP TABLE IF EXISTS unstuck_console_incident;
DROP TABLE IF EXISTS unstuck_console_trend;
