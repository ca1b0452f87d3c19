-- The signed-in user's id beside the session (issue 12): the session and
-- its user are read in one statement on every console request. NULL for a
-- session without a user or written before this migration; the console
-- then reads the user by itself.
ALTER TABLE sessions ADD COLUMN user_id INTEGER;
