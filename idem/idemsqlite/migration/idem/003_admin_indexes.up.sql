-- The indexes of the admin reads (idemdriver.Admin: the console's lists,
-- counts and stuck list). Until this migration the console's own migration
-- line created them, under the same names and definitions: on a database
-- migrated by an earlier release they exist already and IF NOT EXISTS
-- skips them, so the upgrade changes nothing there.

-- Lists of every status, newest change first, paged by (updated_at, id).
-- Lists of one status use unstuck_idem_record_status_updated_idx.
CREATE INDEX IF NOT EXISTS unstuck_console_idem_updated_idx ON unstuck_idem_record (updated_at, id);
-- Lists filtered by scope (tenant) or by operation (route).
CREATE INDEX IF NOT EXISTS unstuck_console_idem_scope_idx ON unstuck_idem_record (scope, updated_at, id);
CREATE INDEX IF NOT EXISTS unstuck_console_idem_operation_idx ON unstuck_idem_record (operation, updated_at, id);
-- Processing records newest first, with the lease, for the stuck list (all
-- tenants or one) and the stuck count; see the PostgreSQL driver's
-- migration 002.
CREATE INDEX IF NOT EXISTS unstuck_console_idem_processing_idx ON unstuck_idem_record (updated_at, id, lease_expires_at)
    WHERE status = 'processing';
CREATE INDEX IF NOT EXISTS unstuck_console_idem_processing_scope_idx ON unstuck_idem_record (scope, updated_at, id, lease_expires_at)
    WHERE status = 'processing';
-- Replaced by the two above (an earlier console migration made it).
DROP INDEX IF EXISTS unstuck_console_idem_stuck_idx;
