-- Reverts 009_person.up.sql; whoever runs it also deletes the
-- ('console', 9) row of unstuck_migration.
ALTER TABLE unstuck_console_user DROP COLUMN person_id;
ALTER TABLE unstuck_console_user DROP CONSTRAINT unstuck_console_user_email_verified_check;
ALTER TABLE unstuck_console_user DROP COLUMN email_verified;
