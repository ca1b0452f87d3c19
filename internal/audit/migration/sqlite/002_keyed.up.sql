-- The keyed chain and its checkpoints (package audit's doc.go, "Tamper
-- evidence"). Entries appended from now on carry the ID of the audit key
-- their hash is an HMAC under; the entries already there keep an empty
-- key_id and verify as legacy SHA-256 links, anchored by the first keyed
-- entry, whose MAC covers their head.
ALTER TABLE unstuck_audit_entry
    ADD COLUMN key_id TEXT NOT NULL DEFAULT '' CHECK (length(key_id) IN (0, 16));

-- No more legacy entries: an insert without a key ID fails.
CREATE TRIGGER unstuck_audit_entry_keyed
BEFORE INSERT ON unstuck_audit_entry
WHEN NEW.key_id = ''
BEGIN
    SELECT RAISE(ABORT, 'unstuck_audit_entry: an entry needs the key ID of its MAC');
END;

-- Checkpoints: a verified head (seq, hash) with its MAC under the audit
-- key. at is Unix microseconds, UTC.
CREATE TABLE unstuck_audit_checkpoint (
    id     INTEGER NOT NULL PRIMARY KEY,
    seq    INTEGER NOT NULL CHECK (seq > 0),
    hash   BLOB    NOT NULL CHECK (length(hash) = 32),
    at     INTEGER NOT NULL,
    key_id TEXT    NOT NULL,
    mac    BLOB    NOT NULL CHECK (length(mac) = 32)
) STRICT;
