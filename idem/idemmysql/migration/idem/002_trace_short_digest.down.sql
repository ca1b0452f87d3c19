ALTER TABLE unstuck_idem_record DROP KEY unstuck_idem_record_short_digest_idx;
ALTER TABLE unstuck_idem_record DROP COLUMN trace_id;
