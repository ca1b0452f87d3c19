-- Decision webhooks (SPEC K26): see the PostgreSQL line's 011_webhook.
-- Times are Unix microseconds.
CREATE TABLE IF NOT EXISTS unstuck_console_webhook_cursor (
    endpoint_key TEXT PRIMARY KEY,
    endpoint     TEXT    NOT NULL,
    seq          INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS unstuck_console_webhook_delivery (
    endpoint_key    TEXT    NOT NULL,
    seq             INTEGER NOT NULL,
    endpoint        TEXT    NOT NULL,
    event_id        TEXT    NOT NULL,
    event_time      INTEGER NOT NULL,
    status          TEXT    NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts        INTEGER NOT NULL,
    last_status     INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT    NOT NULL DEFAULT '',
    next_attempt_at INTEGER,
    delivered_at    INTEGER,
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (endpoint_key, seq)
);
CREATE INDEX IF NOT EXISTS unstuck_console_webhook_delivery_updated ON unstuck_console_webhook_delivery (updated_at);
CREATE INDEX IF NOT EXISTS unstuck_console_webhook_delivery_status ON unstuck_console_webhook_delivery (status, updated_at);
