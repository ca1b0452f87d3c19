CREATE INDEX IF NOT EXISTS unstuck_console_idem_stuck_idx ON unstuck_idem_record (lease_expires_at)
    WHERE status = 'processing';
DROP INDEX IF EXISTS unstuck_console_idem_processing_scope_idx;
DROP INDEX IF EXISTS unstuck_console_idem_processing_idx;
