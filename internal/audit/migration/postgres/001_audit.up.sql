-- The audit trail of the operations console (SPEC CON-K7): one row per
-- decision, denied or conflicting attempt and audited read, chained by
-- SHA-256 (package audit computes hash and prev_hash; see its doc.go).
--
-- seq is assigned by package audit under an advisory lock, not by a
-- sequence, so that a rolled-back append leaves no gap: a gap in seq is
-- always a deleted row. at is the database clock (clock_timestamp() read
-- once the lock is held). before_state and after_state are JSON kept as
-- text, byte for byte as hashed (jsonb would reorder them).
CREATE TABLE unstuck_audit_entry (
    seq          bigint      NOT NULL
        CONSTRAINT unstuck_audit_entry_pkey PRIMARY KEY
        CONSTRAINT unstuck_audit_entry_seq_check CHECK (seq > 0),
    at           timestamptz NOT NULL,
    actor        text        NOT NULL CHECK (actor <> ''),
    role         text        NOT NULL,
    action       text        NOT NULL CHECK (action <> ''),
    target_kind  text        NOT NULL CHECK (target_kind <> ''),
    target_id    text        NOT NULL,
    reason       text        NOT NULL,
    before_state text        NULL,
    after_state  text        NULL,
    outcome      text        NOT NULL CHECK (outcome <> ''),
    request_id   text        NOT NULL,
    client_addr  text        NOT NULL,
    user_agent   text        NOT NULL,
    -- UNIQUE turns a fork of the chain (two entries after one head) into an
    -- error rather than a second branch.
    prev_hash    bytea       NOT NULL
        CONSTRAINT unstuck_audit_entry_prev_hash_key UNIQUE
        CHECK (octet_length(prev_hash) = 32),
    hash         bytea       NOT NULL
        CONSTRAINT unstuck_audit_entry_hash_key UNIQUE
        CHECK (octet_length(hash) = 32)
);

-- The filters of /audit, each paged by seq, newest first.
CREATE INDEX unstuck_audit_entry_actor_idx   ON unstuck_audit_entry (actor, seq);
CREATE INDEX unstuck_audit_entry_action_idx  ON unstuck_audit_entry (action, seq);
CREATE INDEX unstuck_audit_entry_target_idx  ON unstuck_audit_entry (target_kind, target_id, seq);
CREATE INDEX unstuck_audit_entry_outcome_idx ON unstuck_audit_entry (outcome, seq);
CREATE INDEX unstuck_audit_entry_at_idx      ON unstuck_audit_entry (at);

-- Append-only: every UPDATE, DELETE and TRUNCATE fails, whoever runs it.
-- Row triggers do not fire on TRUNCATE, hence the statement trigger. The
-- table's owner or a superuser can still disable them (ALTER TABLE …
-- DISABLE TRIGGER, session_replication_role = replica): revoke the grants
-- too (package audit's doc), and rely on the hash chain to detect the rest.
CREATE FUNCTION unstuck_audit_entry_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'unstuck_audit_entry is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'audit entries are never changed or removed; see package audit';
END
$$;

CREATE TRIGGER unstuck_audit_entry_no_update_delete
    BEFORE UPDATE OR DELETE ON unstuck_audit_entry
    FOR EACH ROW EXECUTE FUNCTION unstuck_audit_entry_append_only();

CREATE TRIGGER unstuck_audit_entry_no_truncate
    BEFORE TRUNCATE ON unstuck_audit_entry
    FOR EACH STATEMENT EXECUTE FUNCTION unstuck_audit_entry_append_only();
