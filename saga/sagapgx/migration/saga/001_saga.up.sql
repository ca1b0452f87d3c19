-- Durable operations (SPEC G2, G3). The engine owns these tables; River's
-- jobs only carry operations forward and are deleted after retention.
CREATE TABLE unstuck_saga_operation (
    id             text        PRIMARY KEY,
    type           text        NOT NULL,
    status         text        NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed',
                                   'compensating', 'compensated', 'review_required')),
    correlation_id text        NOT NULL DEFAULT '',
    input          jsonb       NOT NULL,
    current_step   text        NOT NULL DEFAULT '',
    last_error     text        NOT NULL DEFAULT '',
    review_reason  text        NOT NULL DEFAULT '',
    resolution     text        NOT NULL DEFAULT '',
    version        bigint      NOT NULL,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    finished_at    timestamptz
);
CREATE INDEX unstuck_saga_operation_status_idx ON unstuck_saga_operation (status, updated_at);
CREATE INDEX unstuck_saga_operation_correlation_idx ON unstuck_saga_operation (correlation_id) WHERE correlation_id <> '';

CREATE TABLE unstuck_saga_step (
    operation_id      text        NOT NULL REFERENCES unstuck_saga_operation (id) ON DELETE CASCADE,
    name              text        NOT NULL,
    seq               integer     NOT NULL,
    kind              text        NOT NULL CHECK (kind IN ('compensatable', 'pivot', 'retriable')),
    system            text        NOT NULL DEFAULT '',
    status            text        NOT NULL CHECK (status IN ('pending', 'running', 'retrying', 'uncertain', 'completed',
                                      'failed', 'skipped', 'compensating', 'compensated', 'compensation_failed')),
    idempotency_key   text        NOT NULL,
    external_id       text        NOT NULL DEFAULT '',
    result            jsonb,
    attempts          integer     NOT NULL DEFAULT 0,
    max_attempts      integer     NOT NULL,
    verifications     integer     NOT NULL DEFAULT 0,
    last_error        text        NOT NULL DEFAULT '',
    last_error_class  text        NOT NULL DEFAULT '' CHECK (last_error_class IN ('', 'transient', 'permanent', 'uncertain')),
    compensable       boolean     NOT NULL,
    comp_seq          integer     NOT NULL,
    comp_key          text        NOT NULL,
    comp_status       text        NOT NULL DEFAULT '' CHECK (comp_status IN ('', 'pending', 'running', 'retrying', 'completed', 'failed')),
    comp_attempts     integer     NOT NULL DEFAULT 0,
    comp_max_attempts integer     NOT NULL,
    comp_error        text        NOT NULL DEFAULT '',
    generation        integer     NOT NULL DEFAULT 0,
    started_at        timestamptz,
    finished_at       timestamptz,
    updated_at        timestamptz NOT NULL,
    PRIMARY KEY (operation_id, name)
);
CREATE INDEX unstuck_saga_step_status_idx ON unstuck_saga_step (status, updated_at);

CREATE TABLE unstuck_saga_event (
    id           bigserial   PRIMARY KEY,
    operation_id text        NOT NULL REFERENCES unstuck_saga_operation (id) ON DELETE CASCADE,
    step         text        NOT NULL DEFAULT '',
    action       text        NOT NULL,
    from_status  text        NOT NULL DEFAULT '',
    to_status    text        NOT NULL DEFAULT '',
    actor        text        NOT NULL,
    message      text        NOT NULL DEFAULT '',
    attempt      integer     NOT NULL DEFAULT 0,
    at           timestamptz NOT NULL
);
CREATE INDEX unstuck_saga_event_operation_idx ON unstuck_saga_event (operation_id, id);

CREATE TABLE unstuck_saga_finding (
    id           bigserial   PRIMARY KEY,
    operation_id text        NOT NULL REFERENCES unstuck_saga_operation (id) ON DELETE CASCADE,
    step         text        NOT NULL DEFAULT '',
    kind         text        NOT NULL CHECK (kind IN ('orphan_external', 'missing_external', 'unresolved')),
    external_id  text        NOT NULL DEFAULT '',
    detail       text        NOT NULL,
    detected_at  timestamptz NOT NULL,
    resolved_at  timestamptz
);
CREATE UNIQUE INDEX unstuck_saga_finding_open_idx ON unstuck_saga_finding (operation_id, step, kind) WHERE resolved_at IS NULL;
