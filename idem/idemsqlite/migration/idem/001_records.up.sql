-- Idempotency records for package idem (SPEC IDEM-M1).
--
-- Every timestamp column (lease_expires_at, created_at, updated_at,
-- expires_at) is an INTEGER count of Unix microseconds, UTC. The store
-- writes them from the clock of the process that calls it: SQLite is
-- embedded, so every writer runs on the one host that holds the file.
--
-- key_digest is idem.Digest of (scope, operation, key): the raw key is never
-- stored. resource_ids is a JSON array of strings.
CREATE TABLE unstuck_idem_record (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    scope            TEXT    NOT NULL CHECK (scope <> '' AND length(CAST(scope AS BLOB)) <= 255),
    operation        TEXT    NOT NULL CHECK (operation <> ''),
    key_digest       TEXT    NOT NULL CHECK (length(key_digest) = 64),
    fingerprint      TEXT    NOT NULL DEFAULT '',
    status           TEXT    NOT NULL CHECK (status IN ('processing', 'completed', 'failed', 'pending', 'unavailable')),
    result           BLOB    NULL,
    response_code    INTEGER NOT NULL DEFAULT 0,
    correlation_id   TEXT    NOT NULL DEFAULT '',
    external_ref     TEXT    NOT NULL DEFAULT '',
    resource_ids     TEXT    NOT NULL DEFAULT '[]',
    last_error       TEXT    NOT NULL DEFAULT '',
    owner_token      TEXT    NOT NULL DEFAULT '',
    fence            INTEGER NOT NULL,
    lease_expires_at INTEGER NULL,
    attempts         INTEGER NOT NULL DEFAULT 1,
    version          INTEGER NOT NULL DEFAULT 1,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    -- A processing record always has a lease to judge takeovers by.
    CHECK (status <> 'processing' OR lease_expires_at IS NOT NULL),
    -- The arbiter of Reserve: one record per (scope, operation, key).
    UNIQUE (scope, operation, key_digest)
) STRICT;

-- The console lists records by status, most recently updated first.
CREATE INDEX unstuck_idem_record_status_updated_idx
    ON unstuck_idem_record (status, updated_at, id);

-- Sweep finds records whose retention has ended.
CREATE INDEX unstuck_idem_record_expires_idx
    ON unstuck_idem_record (expires_at);

-- The console finds records by the references an owner attached.
CREATE INDEX unstuck_idem_record_correlation_idx
    ON unstuck_idem_record (correlation_id) WHERE correlation_id <> '';
CREATE INDEX unstuck_idem_record_external_ref_idx
    ON unstuck_idem_record (external_ref) WHERE external_ref <> '';

-- The single fence counter. Every reservation and takeover increments it in
-- its own write transaction, so fences strictly increase across all records,
-- even after a record is deleted and reserved again.
CREATE TABLE unstuck_idem_fence (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    value INTEGER NOT NULL
) STRICT;

INSERT INTO unstuck_idem_fence (id, value) VALUES (1, 0);
