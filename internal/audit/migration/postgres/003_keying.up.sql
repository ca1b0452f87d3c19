-- When keying began (SPEC K24): one row, written once, by this migration,
-- saying from which seq every entry is keyed — the first keyed entry, or
-- the next seq for a trail not keyed yet (1: keyed from the start). The
-- console seals it with a MAC under the audit key (key_id, mac); a
-- verification requires it, so that a chain rewritten without the key as
-- legacy links, or emptied, does not verify. Re-running migrations never
-- writes it again. Checkpoints carry keyed_from under their MAC too, so a
-- marker deleted and rewritten by the table's owner is caught by any
-- checkpoint kept outside the database.
CREATE TABLE unstuck_audit_keying (
    id         smallint    PRIMARY KEY CHECK (id = 1),
    keyed_from bigint      NOT NULL CHECK (keyed_from >= 1),
    at         timestamptz NOT NULL DEFAULT statement_timestamp(),
    key_id     text        NOT NULL DEFAULT '',
    mac        bytea       NOT NULL DEFAULT ''::bytea
);
INSERT INTO unstuck_audit_keying (id, keyed_from)
SELECT 1, coalesce((SELECT min(seq) FROM unstuck_audit_entry WHERE key_id <> ''),
                   (SELECT max(seq) + 1 FROM unstuck_audit_entry), 1);

ALTER TABLE unstuck_audit_checkpoint ADD COLUMN keyed_from bigint NOT NULL DEFAULT 0;
