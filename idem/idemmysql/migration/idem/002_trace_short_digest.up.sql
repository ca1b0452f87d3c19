-- The OpenTelemetry trace ID of the call that created the record or last
-- took it over ('' when that call was not traced), and an index on the
-- digest's first 12 hex digits (idem.SafeKeyID, the short key ID that logs
-- show) for look-ups by a digest or its short form alone (SPEC K11).
-- Safe to run again: a column or index that exists is taken as done.
ALTER TABLE unstuck_idem_record ADD COLUMN trace_id VARBINARY(32) NOT NULL DEFAULT '';
ALTER TABLE unstuck_idem_record ADD KEY unstuck_idem_record_short_digest_idx (key_digest(12));
