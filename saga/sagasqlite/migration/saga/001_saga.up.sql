-- Durable operations (SPEC G2, G3). Times are Unix microseconds (UTC). The engine owns these tables; River's
-- jobs only carry operations forward and are deleted after retention.
CREATE TABLE unstuck_saga_operation (
    id             TEXT        PRIMARY KEY,
    type           TEXT        NOT NULL,
    status         TEXT        NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed',
                                   'compensating', 'compensated', 'review_required')),
    correlation_id TEXT        NOT NULL DEFAULT '',
    input          TEXT        NOT NULL,
    current_step   TEXT        NOT NULL DEFAULT '',
    last_error     TEXT        NOT NULL DEFAULT '',
    review_reason  TEXT        NOT NULL DEFAULT '',
    resolution     TEXT        NOT NULL DEFAULT '',
    version        INTEGER     NOT NULL,
    created_at     INTEGER     NOT NULL,
    updated_at     INTEGER     NOT NULL,
    finished_at    INTEGER    
);
CREATE INDEX unstuck_saga_operation_status_idx ON unstuck_saga_operation (status, updated_at);
CREATE INDEX unstuck_saga_operation_correlation_idx ON unstuck_saga_operation (correlation_id) WHERE correlation_id <> '';

CREATE TABLE unstuck_saga_step (
    operation_id      TEXT        NOT NULL REFERENCES unstuck_saga_operation (id) ON DELETE CASCADE,
    name              TEXT        NOT NULL,
    seq               INTEGER     NOT NULL,
    kind              TEXT        NOT NULL CHECK (kind IN ('compensatable', 'pivot', 'retriable')),
    system            TEXT        NOT NULL DEFAULT '',
    status            TEXT        NOT NULL CHECK (status IN ('pending', 'running', 'retrying', 'uncertain', 'completed',
                                      'failed', 'skipped', 'compensating', 'compensated', 'compensation_failed')),
    idempotency_key   TEXT        NOT NULL,
    external_id       TEXT        NOT NULL DEFAULT '',
    result            TEXT ,
    attempts          INTEGER     NOT NULL DEFAULT 0,
    max_attempts      INTEGER     NOT NULL,
    verifications     INTEGER     NOT NULL DEFAULT 0,
    last_error        TEXT        NOT NULL DEFAULT '',
    last_error_class  TEXT        NOT NULL DEFAULT '' CHECK (last_error_class IN ('', 'transient', 'permanent', 'uncertain')),
    compensable       INTEGER     NOT NULL,
    comp_seq          INTEGER     NOT NULL,
    comp_key          TEXT        NOT NULL,
    comp_status       TEXT        NOT NULL DEFAULT '' CHECK (comp_status IN ('', 'pending', 'running', 'retrying', 'completed', 'failed')),
    comp_attempts     INTEGER     NOT NULL DEFAULT 0,
    comp_max_attempts INTEGER     NOT NULL,
    comp_error        TEXT        NOT NULL DEFAULT '',
    generation        INTEGER     NOT NULL DEFAULT 0,
    started_at        INTEGER    ,
    finished_at       INTEGER    ,
    updated_at        INTEGER     NOT NULL,
    PRIMARY KEY (operation_id, name)
);
CREATE INDEX unstuck_saga_step_status_idx ON unstuck_saga_step (status, updated_at);

CREATE TABLE unstuck_saga_event (
    id           INTEGER     PRIMARY KEY AUTOINCREMENT,
    operation_id TEXT        NOT NULL REFERENCES unstuck_saga_operation (id) ON DELETE CASCADE,
    step         TEXT        NOT NULL DEFAULT '',
    action       TEXT        NOT NULL,
    from_status  TEXT        NOT NULL DEFAULT '',
    to_status    TEXT        NOT NULL DEFAULT '',
    actor        TEXT        NOT NULL,
    message      TEXT        NOT NULL DEFAULT '',
    attempt      INTEGER     NOT NULL DEFAULT 0,
    at           INTEGER     NOT NULL
);
CREATE INDEX unstuck_saga_event_operation_idx ON unstuck_saga_event (operation_id, id);

CREATE TABLE unstuck_saga_finding (
    id           INTEGER     PRIMARY KEY AUTOINCREMENT,
    operation_id TEXT        NOT NULL REFERENCES unstuck_saga_operation (id) ON DELETE CASCADE,
    step         TEXT        NOT NULL DEFAULT '',
    kind         TEXT        NOT NULL CHECK (kind IN ('orphan_external', 'missing_external', 'unresolved')),
    external_id  TEXT        NOT NULL DEFAULT '',
    detail       TEXT        NOT NULL,
    detected_at  INTEGER     NOT NULL,
    resolved_at  INTEGER    
);
CREATE UNIQUE INDEX unstuck_saga_finding_open_idx ON unstuck_saga_finding (operation_id, step, kind) WHERE resolved_at IS NULL;
