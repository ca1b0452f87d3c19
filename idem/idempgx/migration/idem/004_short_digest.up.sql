-- The digest's first 12 hex digits (idem.SafeKeyID, the short key ID that
-- logs show), so that an operator with a digest or its short form from a
-- log line finds the record in any scope and operation (SPEC K11). On a
-- large table, build it beforehand with CREATE INDEX CONCURRENTLY under
-- the same name: IF NOT EXISTS then skips it.
CREATE INDEX IF NOT EXISTS unstuck_idem_record_short_digest_idx
    ON unstuck_idem_record (left(key_digest, 12));
