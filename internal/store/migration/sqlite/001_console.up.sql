-- The operations console's own tables. The console never reads or writes
-- the engine's tables itself, and this line adds nothing to them: the
-- indexes its key pages need belong to the driver's "idem" line
-- (idemsqlite's migration 003; until issue 11 this file created them,
-- under the same names, and a database migrated then keeps them).
--
-- Timestamps of the console's tables are INTEGER Unix microseconds, UTC,
-- like the engine's.

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
