-- Tombstones of forgotten keys (SPEC K21): a key record an operator's
-- decision removed (action: forget, or confirm_not_happened, which
-- releases it) stays findable by its record ID, its raw key (key_hash) and
-- its digest, saying who removed it, when and why. Written in the
-- decision's own transaction, with its audit entry; the entry stays the
-- record of the decision.
CREATE TABLE unstuck_console_tombstone (
    record_id    BIGINT      PRIMARY KEY,
    scope        TEXT        NOT NULL,
    operation    TEXT        NOT NULL,
    key_digest   TEXT        NOT NULL,
    key_hash     TEXT        NOT NULL,
    status       TEXT        NOT NULL,
    external_ref TEXT        NOT NULL,
    action       TEXT        NOT NULL,
    actor        TEXT        NOT NULL,
    reason       TEXT        NOT NULL,
    at           TIMESTAMPTZ NOT NULL
);
CREATE INDEX unstuck_console_tombstone_key_hash ON unstuck_console_tombstone (key_hash);
CREATE INDEX unstuck_console_tombstone_key_digest ON unstuck_console_tombstone (key_digest);
