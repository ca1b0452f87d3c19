-- The audit trail of the operations console (SPEC CON-K7): one row per
-- decision, denied or conflicting attempt and audited read, chained by
-- SHA-256 (package audit computes hash and prev_hash; see its doc.go).
--
-- seq is assigned by package audit inside the caller's write transaction
-- (SQLite has one writer at a time), so a rolled-back append leaves no gap.
-- at is INTEGER Unix microseconds, UTC, from the process clock, like every
-- timestamp of the SQLite driver. before_state and after_state are JSON
-- text, byte for byte as hashed.
CREATE TABLE unstuck_audit_entry (
    seq          INTEGER NOT NULL PRIMARY KEY CHECK (seq > 0),
    at           INTEGER NOT NULL,
    actor        TEXT    NOT NULL CHECK (actor <> ''),
    role         TEXT    NOT NULL,
    action       TEXT    NOT NULL CHECK (action <> ''),
    target_kind  TEXT    NOT NULL CHECK (target_kind <> ''),
    target_id    TEXT    NOT NULL,
    reason       TEXT    NOT NULL,
    before_state TEXT    NULL,
    after_state  TEXT    NULL,
    outcome      TEXT    NOT NULL CHECK (outcome <> ''),
    request_id   TEXT    NOT NULL,
    client_addr  TEXT    NOT NULL,
    user_agent   TEXT    NOT NULL,
    -- UNIQUE turns a fork of the chain into an error.
    prev_hash    BLOB    NOT NULL UNIQUE CHECK (length(prev_hash) = 32),
    hash         BLOB    NOT NULL UNIQUE CHECK (length(hash) = 32)
) STRICT;

-- The filters of /audit, each paged by seq, newest first.
CREATE INDEX unstuck_audit_entry_actor_idx   ON unstuck_audit_entry (actor, seq);
CREATE INDEX unstuck_audit_entry_action_idx  ON unstuck_audit_entry (action, seq);
CREATE INDEX unstuck_audit_entry_target_idx  ON unstuck_audit_entry (target_kind, target_id, seq);
CREATE INDEX unstuck_audit_entry_outcome_idx ON unstuck_audit_entry (outcome, seq);
CREATE INDEX unstuck_audit_entry_at_idx      ON unstuck_audit_entry (at);

-- Append-only: UPDATE and DELETE fail. With a trigger on the table, an
-- unqualified DELETE cannot take SQLite's truncate shortcut either. Anyone
-- who can write the file can drop the triggers; the hash chain detects
-- what they then change.
CREATE TRIGGER unstuck_audit_entry_no_update
BEFORE UPDATE ON unstuck_audit_entry
BEGIN
    SELECT RAISE(ABORT, 'unstuck_audit_entry is append-only: UPDATE is not allowed');
END;

CREATE TRIGGER unstuck_audit_entry_no_delete
BEFORE DELETE ON unstuck_audit_entry
BEGIN
    SELECT RAISE(ABORT, 'unstuck_audit_entry is append-only: DELETE is not allowed');
END;
