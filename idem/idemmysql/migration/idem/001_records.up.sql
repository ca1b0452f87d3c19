-- Idempotency records for package idem (SPEC IDEM-M1), on MySQL 8 or
-- MariaDB 10.11, InnoDB.
--
-- Every statement of this file is safe to run again: MySQL commits each
-- DDL statement on its own, so a crash can leave a migration half applied,
-- and the next Migrate runs the whole file again (see migrate/migratemysql).
--
-- Timestamps (lease_expires_at, created_at, updated_at, expires_at) are
-- BIGINT Unix microseconds, UTC, taken from the database's clock
-- (UTC_TIMESTAMP(6)) unless a caller passes its own Now: no column depends
-- on the session's time_zone.
--
-- The identifying and matched columns are VARBINARY: compared byte for
-- byte, so that 'Acme' and 'acme', or 'a' and 'a ', are different scopes
-- (a _ci or PAD SPACE collation would merge them), and any UTF-8 is kept
-- as given. key_digest is idem.Digest in hex; the raw key is never stored.
-- resource_ids is a JSON array of strings.
CREATE TABLE IF NOT EXISTS unstuck_idem_record (
    id               BIGINT          NOT NULL AUTO_INCREMENT,
    scope            VARBINARY(255)  NOT NULL,
    operation        VARBINARY(255)  NOT NULL,
    key_digest       VARBINARY(64)   NOT NULL,
    fingerprint      VARBINARY(1024) NOT NULL,
    status           VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    result           LONGBLOB        NULL,
    response_code    INT             NOT NULL,
    correlation_id   VARBINARY(1024) NOT NULL,
    external_ref     VARBINARY(1024) NOT NULL,
    resource_ids     MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    last_error       BLOB            NOT NULL,
    owner_token      VARBINARY(255)  NOT NULL,
    fence            BIGINT          NOT NULL CHECK (fence > 0),
    lease_expires_at BIGINT          NULL,
    attempts         INT             NOT NULL,
    version          BIGINT          NOT NULL,
    created_at       BIGINT          NOT NULL,
    updated_at       BIGINT          NOT NULL,
    expires_at       BIGINT          NOT NULL,
    -- idem.KeyHash of the raw key (SPEC K11): its look-up in every scope
    -- and operation. NULL when the caller had no raw key.
    key_hash         VARBINARY(64)   NULL,
    PRIMARY KEY (id),
    -- The arbiter of Reserve: one record per (scope, operation, key).
    UNIQUE KEY unstuck_idem_record_ident_key (scope, operation, key_digest),
    -- The console's lists of one status, newest change first or last, and
    -- the stuck list and count (status = 'processing').
    KEY unstuck_idem_record_status_idx (status, updated_at, id),
    KEY unstuck_idem_record_stuck_idx (status, lease_expires_at),
    -- Sweep.
    KEY unstuck_idem_record_expires_at_idx (expires_at),
    -- Look-ups by the references a running owner attaches.
    KEY unstuck_idem_record_correlation_id_idx (correlation_id),
    KEY unstuck_idem_record_external_ref_idx (external_ref),
    -- Lists of every status, or of one scope or operation.
    KEY unstuck_idem_record_updated_idx (updated_at, id),
    KEY unstuck_idem_record_scope_idx (scope, updated_at, id),
    KEY unstuck_idem_record_operation_idx (operation, updated_at, id),
    KEY unstuck_idem_record_key_hash_idx (key_hash),
    CONSTRAINT unstuck_idem_record_scope_check CHECK (scope <> ''),
    CONSTRAINT unstuck_idem_record_operation_check CHECK (operation <> ''),
    CONSTRAINT unstuck_idem_record_key_digest_check CHECK (length(key_digest) = 64),
    CONSTRAINT unstuck_idem_record_key_hash_check CHECK (key_hash IS NULL OR length(key_hash) = 64),
    CONSTRAINT unstuck_idem_record_status_check
        CHECK (status IN ('processing', 'completed', 'failed', 'pending', 'unavailable')),
    CONSTRAINT unstuck_idem_record_lease_check CHECK (status <> 'processing' OR lease_expires_at IS NOT NULL),
    CONSTRAINT unstuck_idem_record_resource_ids_check CHECK (json_valid(resource_ids))
) ENGINE = InnoDB;

-- Fences. Every reservation and takeover inserts a row here and takes its
-- AUTO_INCREMENT value as its fence: the counter only grows (MySQL 8 and
-- MariaDB >= 10.2.4 keep it across restarts), and taking a value holds no
-- lock until the end of the transaction, so transactional mode does not
-- serialise on it. Sweep deletes every row but the highest.
CREATE TABLE IF NOT EXISTS unstuck_idem_fence (
    fence BIGINT NOT NULL AUTO_INCREMENT,
    PRIMARY KEY (fence)
) ENGINE = InnoDB;

-- Reserve inserts a record with fence 0: this trigger takes its fence from
-- the counter in the same statement, so a reservation is one INSERT in
-- autocommit (one commit) rather than a transaction of two; Reserve reads
-- the fence back. A record inserted with a fence of its own (Seeder) keeps
-- it. Its body is on one line: migrations split statements at a ';' that
-- ends a line. Running it again fails with 1359 (trigger exists), which
-- the migrator takes as done.
CREATE TRIGGER unstuck_idem_record_fence BEFORE INSERT ON unstuck_idem_record FOR EACH ROW
    BEGIN IF NEW.fence = 0 THEN INSERT INTO unstuck_idem_fence () VALUES (); SET NEW.fence = LAST_INSERT_ID(); END IF; END;
