-- When keying began (SPEC K24); see the PostgreSQL line's 003_keying. at
-- is Unix microseconds, UTC. Safe to run again: the table is created if
-- missing, the row inserted if missing, the column taken as done (1060).
CREATE TABLE IF NOT EXISTS unstuck_audit_keying (
    id         TINYINT       NOT NULL,
    keyed_from BIGINT        NOT NULL,
    at         BIGINT        NOT NULL DEFAULT 0,
    key_id     VARBINARY(16) NOT NULL DEFAULT '',
    mac        VARBINARY(32) NOT NULL DEFAULT '',
    PRIMARY KEY (id),
    CONSTRAINT unstuck_audit_keying_id_check CHECK (id = 1),
    CONSTRAINT unstuck_audit_keying_from_check CHECK (keyed_from >= 1)
) ENGINE = InnoDB;
INSERT IGNORE INTO unstuck_audit_keying (id, keyed_from)
SELECT 1, coalesce((SELECT min(seq) FROM unstuck_audit_entry WHERE key_id <> ''),
                   (SELECT max(seq) + 1 FROM unstuck_audit_entry), 1);

ALTER TABLE unstuck_audit_checkpoint ADD COLUMN keyed_from BIGINT NOT NULL DEFAULT 0;
