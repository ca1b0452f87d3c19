ALTER TABLE unstuck_console_user
    DROP COLUMN person_id,
    DROP COLUMN email_verified;
