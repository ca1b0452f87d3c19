CREATE INDEX IF NOT EXISTS unstuck_idem_record_expires_idx ON unstuck_idem_record (expires_at);
DROP INDEX IF EXISTS unstuck_idem_record_sweep_idx;
