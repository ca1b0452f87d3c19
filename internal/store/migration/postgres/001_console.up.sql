-- The operations console's own tables, and the indexes its read model of
-- the engine's records needs. Runs after the pgxv5 driver's "idem" line,
-- which creates unstuck_idem_record.
--
-- The console never writes unstuck_idem_record; the indexes below only
-- serve its lists and counts. This file runs in one transaction, so they
-- are not built CONCURRENTLY: on a large table in use, the build holds a
-- SHARE lock that makes engine writes wait (about 90 s at 10 M records on
-- 2 cores). To avoid that, create them beforehand with CREATE INDEX
-- CONCURRENTLY under the same names and definitions (and check that none
-- is left INVALID): the IF NOT EXISTS below then skips them. Every engine
-- write changes updated_at, so each index here also takes one entry per
-- write: keep their number small.

-- Local console accounts (SPEC CON-K5). The role is checked against the
-- console's list of roles by package store, not here, so that adding a role
-- needs no migration.
CREATE TABLE unstuck_console_user (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    username      text        NOT NULL
        CONSTRAINT unstuck_console_user_username_check CHECK (username ~ '^[a-z0-9._-]{1,64}$'),
    role          text        NOT NULL
        CONSTRAINT unstuck_console_user_role_check CHECK (role <> ''),
    password_hash text        NOT NULL
        CONSTRAINT unstuck_console_user_password_hash_check CHECK (password_hash <> ''),
    disabled      boolean     NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    CONSTRAINT unstuck_console_user_username_key UNIQUE (username)
);

-- The table of scs's pgxstore, exactly as its README gives it. pgxstore
-- names it "sessions", unqualified, so it resolves in the pool's
-- search_path; no IF NOT EXISTS, so that an application table of that name
-- fails this migration instead of being taken over.
CREATE TABLE sessions (
	token TEXT PRIMARY KEY,
	data BYTEA NOT NULL,
	expiry TIMESTAMPTZ NOT NULL
);

CREATE INDEX sessions_expiry_idx ON sessions (expiry);

-- Lists of every status, newest change first, paged by (updated_at, id).
-- Lists of one status use the engine's (status, updated_at, id) index.
CREATE INDEX IF NOT EXISTS unstuck_console_idem_updated_idx ON unstuck_idem_record (updated_at, id);
-- Lists filtered by scope (tenant) or by operation (route).
CREATE INDEX IF NOT EXISTS unstuck_console_idem_scope_idx ON unstuck_idem_record (scope, updated_at, id);
CREATE INDEX IF NOT EXISTS unstuck_console_idem_operation_idx ON unstuck_idem_record (operation, updated_at, id);
-- Counting processing records past their lease.
CREATE INDEX IF NOT EXISTS unstuck_console_idem_stuck_idx ON unstuck_idem_record (lease_expires_at)
    WHERE status = 'processing';
