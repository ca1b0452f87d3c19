ALTER TABLE unstuck_idem_record DROP COLUMN trace_id;
