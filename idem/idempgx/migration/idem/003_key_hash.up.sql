-- The raw key's look-up hash (idem.KeyHash), so that an operator with only
-- the raw key finds its records in every scope and operation (SPEC K11).
-- NULL for records reserved before this migration.
ALTER TABLE unstuck_idem_record ADD COLUMN IF NOT EXISTS key_hash text
    CHECK (key_hash IS NULL OR length(key_hash) = 64);
CREATE INDEX IF NOT EXISTS unstuck_idem_record_key_hash_idx
    ON unstuck_idem_record (key_hash) WHERE key_hash IS NOT NULL;
