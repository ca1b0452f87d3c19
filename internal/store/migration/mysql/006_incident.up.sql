-- Trends and incidents (issue 15, SPEC K14, K15) on MySQL 8 or MariaDB
-- 10.6+; see the PostgreSQL line's 006_incident. Numbered 006 as there, so
-- that one number names the migration on every line. Every statement is
-- safe to run again (CREATE TABLE IF NOT EXISTS; MySQL commits each DDL
-- statement on its own). Times are Unix seconds; text is utf8mb4 with a
-- binary collation, compared byte for byte as on PostgreSQL and SQLite.
--
-- unstuck_console_trend: counts per state, at minute resolution (res 'm',
-- kept 7 days), per quarter-hour (res 'q', the highest, kept 2 days) and
-- per hour (res 'h', the highest, kept 90 days). A minute is written once
-- (the first snapshot of it wins), so two consoles never double-count.
CREATE TABLE IF NOT EXISTS unstuck_console_trend (
    res   CHAR(1) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    at    BIGINT       NOT NULL,
    kind  VARCHAR(64)  NOT NULL,
    state VARCHAR(64)  NOT NULL,
    count BIGINT       NOT NULL,
    exact TINYINT      NOT NULL,
    PRIMARY KEY (res, at, kind, state),
    CONSTRAINT unstuck_console_trend_res_check CHECK (res IN ('m', 'q', 'h')),
    CONSTRAINT unstuck_console_trend_exact_check CHECK (exact IN (0, 1))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- One row per incident group, keyed by the hash of what identifies it;
-- count is the latest snapshot's (0 once the group has gone). MySQL has no
-- partial index: the open groups are read from (count DESC, group_key).
CREATE TABLE IF NOT EXISTS unstuck_console_incident (
    group_key  VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    kind       TEXT    NOT NULL,
    state      TEXT    NOT NULL,
    operation  TEXT    NOT NULL,
    step       TEXT    NOT NULL,
    class      TEXT    NOT NULL,
    message    TEXT    NOT NULL,
    `system`   TEXT    NOT NULL,
    sample     TEXT    NOT NULL,
    count      BIGINT  NOT NULL,
    exact      TINYINT NOT NULL,
    first_seen BIGINT  NOT NULL,
    last_seen  BIGINT  NOT NULL,
    updated_at BIGINT  NOT NULL,
    PRIMARY KEY (group_key),
    KEY unstuck_console_incident_open (count DESC, group_key),
    CONSTRAINT unstuck_console_incident_exact_check CHECK (exact IN (0, 1))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The highest count of each group per hour: the 24 h sparkline.
CREATE TABLE IF NOT EXISTS unstuck_console_incident_hour (
    group_key VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    hour      BIGINT NOT NULL,
    count     BIGINT NOT NULL,
    PRIMARY KEY (group_key, hour)
) ENGINE = InnoDB;
