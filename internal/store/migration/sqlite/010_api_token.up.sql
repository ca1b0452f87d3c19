-- API tokens of the operator API (SPEC K25); see the PostgreSQL line's
-- 010_api_token. Times are Unix microseconds.
CREATE TABLE unstuck_console_api_token (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    name         TEXT    NOT NULL UNIQUE,
    owner        TEXT,
    role         TEXT    NOT NULL DEFAULT '',
    secret_hash  BLOB    NOT NULL UNIQUE CHECK (length(secret_hash) = 32),
    created_by   TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER,
    revoked_at   INTEGER,
    last_used_at INTEGER,
    CHECK ((owner IS NULL) <> (role = ''))
);
