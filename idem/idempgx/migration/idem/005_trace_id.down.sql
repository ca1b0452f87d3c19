ALTER TABLE unstuck_idem_record DROP COLUMN IF EXISTS trace_id;
