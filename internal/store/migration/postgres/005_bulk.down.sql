DROP TABLE IF EXISTS unstuck_console_bulk_item;
DROP TABLE IF EXISTS unstuck_console_bulk;
