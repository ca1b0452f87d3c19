DROP INDEX IF EXISTS unstuck_idem_record_key_hash_idx;
ALTER TABLE unstuck_idem_record DROP COLUMN key_hash;
