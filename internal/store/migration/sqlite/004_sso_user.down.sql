DROP INDEX unstuck_console_user_subject_key;
ALTER TABLE unstuck_console_user DROP COLUMN display_name;
ALTER TABLE unstuck_console_user DROP COLUMN email;
ALTER TABLE unstuck_console_user DROP COLUMN subject;
ALTER TABLE unstuck_console_user DROP COLUMN source;
