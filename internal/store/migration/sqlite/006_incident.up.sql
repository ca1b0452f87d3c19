-- Trends and incidents (issue 15, SPEC K14, K15), written once a minute by
-- the console that holds the snapshot lock. Times are Unix seconds.
--
-- unstuck_console_trend: counts per state, at minute resolution (res 'm',
-- kept 7 days), per quarter-hour (res 'q', the highest, kept 2 days, what
-- the overview's 24 h draws) and per hour (res 'h', the highest, kept 90
-- days). A minute is written once (the first snapshot of it wins), so two
-- consoles never double-count.
CREATE TABLE unstuck_console_trend (
    res   TEXT    NOT NULL CHECK (res IN ('m', 'q', 'h')),
    at    INTEGER NOT NULL,
    kind  TEXT    NOT NULL,
    state TEXT    NOT NULL,
    count INTEGER NOT NULL,
    exact INTEGER NOT NULL,
    PRIMARY KEY (res, at, kind, state)
);

-- One row per incident group, keyed by the hash of what identifies it;
-- count is the latest snapshot's (0 once the group has gone).
CREATE TABLE unstuck_console_incident (
    group_key  TEXT    PRIMARY KEY,
    kind       TEXT    NOT NULL,
    state      TEXT    NOT NULL,
    operation  TEXT    NOT NULL,
    step       TEXT    NOT NULL,
    class      TEXT    NOT NULL,
    message    TEXT    NOT NULL,
    system     TEXT    NOT NULL,
    sample     TEXT    NOT NULL,
    count      INTEGER NOT NULL,
    exact      INTEGER NOT NULL,
    first_seen INTEGER NOT NULL,
    last_seen  INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX unstuck_console_incident_open ON unstuck_console_incident (count DESC, group_key) WHERE count > 0;

-- The highest count of each group per hour: the 24 h sparkline.
CREATE TABLE unstuck_console_incident_hour (
    group_key TEXT   NOT NULL,
    hour      INTEGER NOT NULL,
    count     INTEGER NOT NULL,
    PRIMARY KEY (group_key, hour)
);
