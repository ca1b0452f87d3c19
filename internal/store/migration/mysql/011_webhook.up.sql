-- Decision webhooks (SPEC K26) on MySQL 8 or MariaDB 10.6+: see the
-- PostgreSQL line's 011_webhook. Times are Unix microseconds. Every
-- statement is safe to run again (CREATE TABLE IF NOT EXISTS, the indexes
-- inside it). The relay itself needs decision events, which MySQL does
-- not emit (no River driver); the tables keep the schema one on every
-- line.
CREATE TABLE IF NOT EXISTS unstuck_console_webhook_cursor (
    endpoint_key VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    endpoint     TEXT   NOT NULL,
    seq          BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS unstuck_console_webhook_delivery (
    endpoint_key    VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    seq             BIGINT      NOT NULL,
    endpoint        TEXT        NOT NULL,
    event_id        VARCHAR(64) NOT NULL,
    event_time      BIGINT      NOT NULL,
    status          VARCHAR(16) NOT NULL,
    attempts        INT         NOT NULL,
    last_status     INT         NOT NULL DEFAULT 0,
    last_error      TEXT        NOT NULL DEFAULT (''),
    next_attempt_at BIGINT      NULL,
    delivered_at    BIGINT      NULL,
    updated_at      BIGINT      NOT NULL,
    PRIMARY KEY (endpoint_key, seq),
    KEY unstuck_console_webhook_delivery_updated (updated_at),
    KEY unstuck_console_webhook_delivery_status (status, updated_at),
    CONSTRAINT unstuck_console_webhook_delivery_status_check CHECK (status IN ('pending', 'delivered', 'failed'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
