-- Reverts 002_fence_on_insert.up.sql.
DROP TRIGGER IF EXISTS unstuck_idem_record_fence;
