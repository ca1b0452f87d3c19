-- One person behind several console accounts (SPEC K13) on MySQL 8 or
-- MariaDB 10.6+; see the PostgreSQL line's 009_person. email_verified is
-- 0 or 1; person_id is NULL or the smallest id of the account's link
-- group. One change per statement, each safe to run again (a column or
-- check that exists already is taken as done).
ALTER TABLE unstuck_console_user ADD COLUMN email_verified TINYINT NOT NULL DEFAULT 0;
ALTER TABLE unstuck_console_user ADD CONSTRAINT unstuck_console_user_email_verified_check CHECK (email_verified IN (0, 1));
ALTER TABLE unstuck_console_user ADD COLUMN person_id BIGINT NULL;
