ALTER TABLE unstuck_audit_checkpoint DROP COLUMN keyed_from;
DROP TABLE IF EXISTS unstuck_audit_keying;
