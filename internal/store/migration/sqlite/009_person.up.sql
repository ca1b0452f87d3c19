-- One person behind several console accounts (SPEC K13); see the
-- PostgreSQL line's 009_person. email_verified is 0 or 1; person_id is
-- NULL or the smallest id of the account's link group.
ALTER TABLE unstuck_console_user ADD COLUMN email_verified INTEGER NOT NULL DEFAULT 0 CHECK (email_verified IN (0, 1));
ALTER TABLE unstuck_console_user ADD COLUMN person_id INTEGER;
