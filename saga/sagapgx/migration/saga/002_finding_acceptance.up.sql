-- Issue 9 item 6: an operator's resolution accepts a finding; the
-- fingerprint (kind, step and the facts compared) tells a known, accepted
-- difference from a new one, and a new one names the finding it reopens.
ALTER TABLE unstuck_saga_finding ADD COLUMN fingerprint text NOT NULL DEFAULT '';
ALTER TABLE unstuck_saga_finding ADD COLUMN resolved_by text NOT NULL DEFAULT '';
ALTER TABLE unstuck_saga_finding ADD COLUMN supersedes bigint;
CREATE INDEX unstuck_saga_finding_operation_idx ON unstuck_saga_finding (operation_id, id);
