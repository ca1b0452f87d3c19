-- The operations console's own tables, and the indexes its read model of
-- the engine's records needs. Runs after the sqlite driver's "idem" line,
-- which creates unstuck_idem_record.
--
-- Timestamps of the console's tables are INTEGER Unix microseconds, UTC,
-- like the engine's. The console never writes unstuck_idem_record; the
-- indexes below only serve its lists and counts.

-- Local console accounts (SPEC CON-K5). The role is checked against the
-- console's list of roles by package store, not here, so that adding a role
-- needs no migration.
CREATE TABLE unstuck_console_user (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    username      TEXT    NOT NULL UNIQUE
        CHECK (length(username) BETWEEN 1 AND 64 AND username NOT GLOB '*[^a-z0-9._-]*'),
    role          TEXT    NOT NULL CHECK (role <> ''),
    password_hash TEXT    NOT NULL CHECK (password_hash <> ''),
    disabled      INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
) STRICT;

-- The table of scs's sqlite3store, exactly as its README gives it (not
-- STRICT: expiry is a REAL julian day the store computes itself).
-- sqlite3store names it "sessions" by default; no IF NOT EXISTS, so that an
-- application table of that name fails this migration instead of being
-- taken over.
CREATE TABLE sessions (
	token TEXT PRIMARY KEY,
	data BLOB NOT NULL,
	expiry REAL NOT NULL
);

CREATE INDEX sessions_expiry_idx ON sessions(expiry);

-- Lists of every status, newest change first, paged by (updated_at, id).
-- Lists of one status use the engine's (status, updated_at, id) index.
CREATE INDEX IF NOT EXISTS unstuck_console_idem_updated_idx ON unstuck_idem_record (updated_at, id);
-- Lists filtered by scope (tenant) or by operation (route).
CREATE INDEX IF NOT EXISTS unstuck_console_idem_scope_idx ON unstuck_idem_record (scope, updated_at, id);
CREATE INDEX IF NOT EXISTS unstuck_console_idem_operation_idx ON unstuck_idem_record (operation, updated_at, id);
-- Counting processing records past their lease.
CREATE INDEX IF NOT EXISTS unstuck_console_idem_stuck_idx ON unstuck_idem_record (lease_expires_at)
    WHERE status = 'processing';
