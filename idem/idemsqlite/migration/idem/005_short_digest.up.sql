-- The digest's first 12 hex digits (idem.SafeKeyID, the short key ID that
-- logs show), so that an operator with a digest or its short form from a
-- log line finds the record in any scope and operation (SPEC K11).
CREATE INDEX IF NOT EXISTS unstuck_idem_record_short_digest_idx
    ON unstuck_idem_record (substr(key_digest, 1, 12));
