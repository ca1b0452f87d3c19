-- Decision webhooks (SPEC K26): the relay's cursor per endpoint and the
-- delivery log. An endpoint is named by endpoint_key, the hex SHA-256 of
-- its whole URL, and shown as endpoint, the URL without credentials, query
-- or fragment (which may hold tokens). Numbered 011 on every line.
--
-- unstuck_console_webhook_cursor: the seq of the newest audit entry the
-- relay is done with for the endpoint (delivered, or given up on).
CREATE TABLE IF NOT EXISTS unstuck_console_webhook_cursor (
    endpoint_key TEXT PRIMARY KEY,
    endpoint     TEXT        NOT NULL,
    seq          BIGINT      NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL
);

-- unstuck_console_webhook_delivery: one row per endpoint and event tried:
-- pending (to be retried at next_attempt_at), delivered (a 2xx) or failed
-- (given up after the maximum attempts). last_status is the last HTTP
-- status (0: no response), last_error the last failure without the URL or
-- the response's body.
CREATE TABLE IF NOT EXISTS unstuck_console_webhook_delivery (
    endpoint_key    TEXT        NOT NULL,
    seq             BIGINT      NOT NULL,
    endpoint        TEXT        NOT NULL,
    event_id        TEXT        NOT NULL,
    event_time      TIMESTAMPTZ NOT NULL,
    status          TEXT        NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts        INTEGER     NOT NULL,
    last_status     INTEGER     NOT NULL DEFAULT 0,
    last_error      TEXT        NOT NULL DEFAULT '',
    next_attempt_at TIMESTAMPTZ,
    delivered_at    TIMESTAMPTZ,
    updated_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (endpoint_key, seq)
);
CREATE INDEX IF NOT EXISTS unstuck_console_webhook_delivery_updated ON unstuck_console_webhook_delivery (updated_at);
CREATE INDEX IF NOT EXISTS unstuck_console_webhook_delivery_status ON unstuck_console_webhook_delivery (status, updated_at);
