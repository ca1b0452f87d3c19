-- The keyed chain and its checkpoints (package audit's doc.go, "Tamper
-- evidence"), as migration 002 of the other dialects. Entries carry the
-- ID of the audit key their hash is an HMAC under. Every statement is safe
-- to run again: a column or trigger that exists (1060, 1359) is taken as
-- done by the migrator.
ALTER TABLE unstuck_audit_entry
    ADD COLUMN key_id VARBINARY(16) NOT NULL DEFAULT '' CHECK (length(key_id) IN (0, 16));

-- No legacy entries: an insert without a key ID fails. The body is on one
-- line: migrations split statements at a ';' that ends a line.
CREATE TRIGGER unstuck_audit_entry_keyed BEFORE INSERT ON unstuck_audit_entry FOR EACH ROW
    BEGIN IF NEW.key_id = '' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'unstuck_audit_entry: an entry needs the key ID of its MAC'; END IF; END;

-- Checkpoints: a verified head (seq, hash) with its MAC under the audit
-- key. at is Unix microseconds, UTC.
CREATE TABLE IF NOT EXISTS unstuck_audit_checkpoint (
    id     BIGINT        NOT NULL AUTO_INCREMENT,
    seq    BIGINT        NOT NULL,
    hash   BINARY(32)    NOT NULL,
    at     BIGINT        NOT NULL,
    key_id VARBINARY(16) NOT NULL,
    mac    BINARY(32)    NOT NULL,
    PRIMARY KEY (id),
    CONSTRAINT unstuck_audit_checkpoint_seq_check CHECK (seq > 0)
) ENGINE = InnoDB;
