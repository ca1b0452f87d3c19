-- The operations console's own tables. The console never reads or writes
-- the engine's tables itself, and this line adds nothing to them: the
-- indexes its key pages need belong to the driver's "idem" line
-- (idempgx's migration 002; until issue 11 this file created them, under
-- the same names, and a database migrated then keeps them).

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
