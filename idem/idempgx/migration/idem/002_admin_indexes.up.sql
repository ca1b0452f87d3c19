-- The indexes of the admin reads (idemdriver.Admin: the console's lists,
-- counts and stuck list). Until this migration the console's own migration
-- line created them, under the same names and definitions: on a database
-- migrated by an earlier release they exist already and IF NOT EXISTS
-- skips them, so the upgrade changes nothing there.
--
-- This file runs in one transaction, so they are not built CONCURRENTLY:
-- on a large table in use, the build holds a SHARE lock that makes engine
-- writes wait (about 90 s at 10 M records on 2 cores). To avoid that,
-- create them beforehand with CREATE INDEX CONCURRENTLY under the same
-- names and definitions (and check that none is left INVALID). Every
-- engine write changes updated_at, so each index here also takes one entry
-- per write: keep their number small.

-- Lists of every status, newest change first, paged by (updated_at, id).
-- Lists of one status use unstuck_idem_record_status_idx.
CREATE INDEX IF NOT EXISTS unstuck_console_idem_updated_idx ON unstuck_idem_record (updated_at, id);
-- Lists filtered by scope (tenant) or by operation (route).
CREATE INDEX IF NOT EXISTS unstuck_console_idem_scope_idx ON unstuck_idem_record (scope, updated_at, id);
CREATE INDEX IF NOT EXISTS unstuck_console_idem_operation_idx ON unstuck_idem_record (operation, updated_at, id);
-- The stuck list (processing past its lease) is read newest first, for all
-- tenants or one. An index on lease_expires_at alone made PostgreSQL read
-- every processing record's heap page and sort them: at 10 M records with
-- 50 000 processing, 175 ms; one tenant's stuck list took seconds. These
-- two partial indexes hold only processing records (small), in list order,
-- with the lease included for the filter and the capped stuck count
-- (BENCHMARKS.md, console at 10 M).
CREATE INDEX IF NOT EXISTS unstuck_console_idem_processing_idx ON unstuck_idem_record (updated_at, id)
    INCLUDE (lease_expires_at) WHERE status = 'processing';
CREATE INDEX IF NOT EXISTS unstuck_console_idem_processing_scope_idx ON unstuck_idem_record (scope, updated_at, id)
    INCLUDE (lease_expires_at) WHERE status = 'processing';
-- Replaced by the two above (an earlier console migration made it).
DROP INDEX IF EXISTS unstuck_console_idem_stuck_idx;
