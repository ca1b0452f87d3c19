-- The sweep's index: records by the end of their retention, pending ones
-- left out. The sweep never deletes a pending record (it waits for an
-- operator), so with them in the index every sweep read past each pending
-- record whose retention had ended, from the oldest end, and slowed as
-- they accumulated. The sweep's statements name the index's condition,
-- status <> 'pending', as SQLite requires of a partial index's users.
CREATE INDEX IF NOT EXISTS unstuck_idem_record_sweep_idx
    ON unstuck_idem_record (expires_at) WHERE status <> 'pending';
DROP INDEX IF EXISTS unstuck_idem_record_expires_idx;
