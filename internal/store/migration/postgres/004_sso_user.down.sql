DROP INDEX unstuck_console_user_subject_key;
ALTER TABLE unstuck_console_user DROP COLUMN source, DROP COLUMN subject, DROP COLUMN email, DROP COLUMN display_name;
