-- Processing records newest first, with the lease, for the stuck list (all
-- tenants or one) and the stuck count; see the PostgreSQL migration of the
-- same number.
CREATE INDEX IF NOT EXISTS unstuck_console_idem_processing_idx ON unstuck_idem_record (updated_at, id, lease_expires_at)
    WHERE status = 'processing';
CREATE INDEX IF NOT EXISTS unstuck_console_idem_processing_scope_idx ON unstuck_idem_record (scope, updated_at, id, lease_expires_at)
    WHERE status = 'processing';
DROP INDEX IF EXISTS unstuck_console_idem_stuck_idx;
