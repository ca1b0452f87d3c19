-- Tombstones of forgotten keys (SPEC K21); see the PostgreSQL line's
-- 007_tombstone. Times are Unix microseconds, as in the bulk tables.
CREATE TABLE unstuck_console_tombstone (
    record_id    INTEGER PRIMARY KEY,
    scope        TEXT    NOT NULL,
    operation    TEXT    NOT NULL,
    key_digest   TEXT    NOT NULL,
    key_hash     TEXT    NOT NULL,
    status       TEXT    NOT NULL,
    external_ref TEXT    NOT NULL,
    action       TEXT    NOT NULL,
    actor        TEXT    NOT NULL,
    reason       TEXT    NOT NULL,
    at           INTEGER NOT NULL
);
CREATE INDEX unstuck_console_tombstone_key_hash ON unstuck_console_tombstone (key_hash);
CREATE INDEX unstuck_console_tombstone_key_digest ON unstuck_console_tombstone (key_digest);
