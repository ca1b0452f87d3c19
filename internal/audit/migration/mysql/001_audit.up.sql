-- The audit trail of the operations console (SPEC CON-K7) on MySQL 8 or
-- MariaDB 10.6+, InnoDB. Every statement is safe to run again
-- (internal/migrate.MySQL: MySQL commits each DDL statement on its own).
--
-- seq is assigned by package audit while it holds the lock row of
-- unstuck_audit_lock (FOR UPDATE, until the appending transaction ends),
-- so that a rolled-back append leaves no gap. at is BIGINT Unix
-- microseconds, UTC, from the database's clock. Text columns are
-- VARBINARY or BLOB: compared byte for byte, whatever the collation.
-- before_state and after_state are JSON text, byte for byte as hashed.
CREATE TABLE IF NOT EXISTS unstuck_audit_entry (
    seq          BIGINT         NOT NULL,
    at           BIGINT         NOT NULL,
    actor        VARBINARY(256) NOT NULL,
    role         VARBINARY(256) NOT NULL,
    action       VARBINARY(256) NOT NULL,
    target_kind  VARBINARY(256) NOT NULL,
    target_id    VARBINARY(256) NOT NULL,
    reason       BLOB           NOT NULL,
    before_state MEDIUMBLOB     NULL,
    after_state  MEDIUMBLOB     NULL,
    outcome      VARBINARY(256) NOT NULL,
    request_id   BLOB           NOT NULL,
    client_addr  BLOB           NOT NULL,
    user_agent   BLOB           NOT NULL,
    prev_hash    BINARY(32)     NOT NULL,
    hash         BINARY(32)     NOT NULL,
    PRIMARY KEY (seq),
    -- UNIQUE turns a fork of the chain (two entries after one head) into
    -- an error rather than a second branch.
    UNIQUE KEY unstuck_audit_entry_prev_hash_key (prev_hash),
    UNIQUE KEY unstuck_audit_entry_hash_key (hash),
    -- The filters of /audit, each paged by seq, newest first.
    KEY unstuck_audit_entry_actor_idx (actor, seq),
    KEY unstuck_audit_entry_action_idx (action, seq),
    KEY unstuck_audit_entry_target_idx (target_kind, target_id, seq),
    KEY unstuck_audit_entry_outcome_idx (outcome, seq),
    KEY unstuck_audit_entry_at_idx (at),
    CONSTRAINT unstuck_audit_entry_seq_check CHECK (seq > 0),
    CONSTRAINT unstuck_audit_entry_actor_check CHECK (actor <> ''),
    CONSTRAINT unstuck_audit_entry_action_check CHECK (action <> ''),
    CONSTRAINT unstuck_audit_entry_target_kind_check CHECK (target_kind <> ''),
    CONSTRAINT unstuck_audit_entry_outcome_check CHECK (outcome <> '')
) ENGINE = InnoDB;

-- Append-only: UPDATE and DELETE fail. (TRUNCATE and DROP skip triggers:
-- keep those privileges from the application's user; the hash chain and
-- the checkpoints detect what anyone who has them changes.)
CREATE TRIGGER unstuck_audit_entry_no_update BEFORE UPDATE ON unstuck_audit_entry FOR EACH ROW
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'unstuck_audit_entry is append-only: UPDATE is not allowed';
CREATE TRIGGER unstuck_audit_entry_no_delete BEFORE DELETE ON unstuck_audit_entry FOR EACH ROW
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'unstuck_audit_entry is append-only: DELETE is not allowed';

-- The lock that serialises appends: one row, locked FOR UPDATE by every
-- append until its transaction ends (PostgreSQL's advisory lock).
CREATE TABLE IF NOT EXISTS unstuck_audit_lock (
    id TINYINT NOT NULL,
    PRIMARY KEY (id),
    CONSTRAINT unstuck_audit_lock_one CHECK (id = 1)
) ENGINE = InnoDB;
INSERT IGNORE INTO unstuck_audit_lock (id) VALUES (1);
