DROP TABLE IF EXISTS unstuck_console_tombstone;
