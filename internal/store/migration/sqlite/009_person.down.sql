ALTER TABLE unstuck_console_user DROP COLUMN person_id;
ALTER TABLE unstuck_console_user DROP COLUMN email_verified;
