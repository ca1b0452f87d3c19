-- The stuck list (processing past its lease) is read newest first, for all
-- tenants or one. An index on lease_expires_at alone made PostgreSQL read
-- every processing record's heap page and sort them: at 10 M records with
-- 50 000 processing, 175 ms; one tenant's stuck list took seconds. These
-- two partial indexes hold only processing records (small), in list order,
-- with the lease included for the filter and the capped stuck count
-- (BENCHMARKS.md, console at 10 M). On a large live table, create them
-- CONCURRENTLY before migrating.
CREATE INDEX IF NOT EXISTS unstuck_console_idem_processing_idx ON unstuck_idem_record (updated_at, id)
    INCLUDE (lease_expires_at) WHERE status = 'processing';
CREATE INDEX IF NOT EXISTS unstuck_console_idem_processing_scope_idx ON unstuck_idem_record (scope, updated_at, id)
    INCLUDE (lease_expires_at) WHERE status = 'processing';
DROP INDEX IF EXISTS unstuck_console_idem_stuck_idx;
