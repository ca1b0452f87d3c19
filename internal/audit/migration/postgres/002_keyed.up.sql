-- The keyed chain and its checkpoints (package audit's doc.go, "Tamper
-- evidence"). Entries appended from now on carry the ID of the audit key
-- their hash is an HMAC under; the entries already there keep an empty
-- key_id and verify as legacy SHA-256 links, anchored by the first keyed
-- entry, whose MAC covers their head.
ALTER TABLE unstuck_audit_entry
    ADD COLUMN key_id text NOT NULL DEFAULT ''
        CONSTRAINT unstuck_audit_entry_key_id_check CHECK (key_id ~ '^([0-9a-f]{16})?$');

-- No more legacy entries: an insert without a key ID fails, so that a role
-- that may only insert cannot append an unkeyed entry before the console's
-- first keyed one (after it, verification reports one anyway).
CREATE FUNCTION unstuck_audit_entry_keyed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.key_id = '' THEN
        RAISE EXCEPTION 'unstuck_audit_entry: an entry needs the key ID of its MAC'
            USING ERRCODE = 'check_violation',
                  HINT = 'entries are appended by the console, which holds the audit key';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER unstuck_audit_entry_keyed
    BEFORE INSERT ON unstuck_audit_entry
    FOR EACH ROW EXECUTE FUNCTION unstuck_audit_entry_keyed();

-- Checkpoints: a verified head (seq, hash) with its MAC under the audit
-- key, as `console audit checkpoint` prints it. The table is a convenience
-- for /audit; the copies that count are kept outside the database.
CREATE TABLE unstuck_audit_checkpoint (
    id     bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    seq    bigint      NOT NULL CHECK (seq > 0),
    hash   bytea       NOT NULL CHECK (octet_length(hash) = 32),
    at     timestamptz NOT NULL,
    key_id text        NOT NULL,
    mac    bytea       NOT NULL CHECK (octet_length(mac) = 32)
);
