-- Tombstones of forgotten keys (SPEC K21) on MySQL 8 or MariaDB 10.6+; see
-- the PostgreSQL line's 007_tombstone. Safe to run again. Times are Unix
-- microseconds; text is utf8mb4 with a binary collation.
CREATE TABLE IF NOT EXISTS unstuck_console_tombstone (
    record_id    BIGINT        NOT NULL PRIMARY KEY,
    scope        VARCHAR(255)  NOT NULL,
    operation    VARCHAR(255)  NOT NULL,
    key_digest   VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    key_hash     VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    status       VARCHAR(32)   NOT NULL,
    external_ref VARCHAR(255)  NOT NULL,
    action       VARCHAR(64)   NOT NULL,
    actor        VARCHAR(255)  NOT NULL,
    reason       VARCHAR(4000) NOT NULL,
    at           BIGINT        NOT NULL,
    INDEX unstuck_console_tombstone_key_hash (key_hash),
    INDEX unstuck_console_tombstone_key_digest (key_digest)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
