-- When keying began (SPEC K24); see the PostgreSQL line's 003_keying. at
-- is Unix microseconds, UTC.
CREATE TABLE unstuck_audit_keying (
    id         INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    keyed_from INTEGER NOT NULL CHECK (keyed_from >= 1),
    at         INTEGER NOT NULL DEFAULT 0,
    key_id     TEXT    NOT NULL DEFAULT '',
    mac        BLOB    NOT NULL DEFAULT x''
) STRICT;
INSERT INTO unstuck_audit_keying (id, keyed_from)
SELECT 1, coalesce((SELECT min(seq) FROM unstuck_audit_entry WHERE key_id <> ''),
                   (SELECT max(seq) + 1 FROM unstuck_audit_entry), 1);

ALTER TABLE unstuck_audit_checkpoint ADD COLUMN keyed_from INTEGER NOT NULL DEFAULT 0;
