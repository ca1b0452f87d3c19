-- Processing records newest first, with the lease, for the stuck list and
-- the stuck count (see the PostgreSQL migration of the same number).
CREATE INDEX IF NOT EXISTS unstuck_console_idem_processing_idx ON unstuck_idem_record (updated_at, id, lease_expires_at)
    WHERE status = 'processing';
DROP INDEX IF EXISTS unstuck_console_idem_stuck_idx;
