-- Fences come from one sequence for every record, so a fence never repeats,
-- even after a record is deleted and its key reserved again.
CREATE SEQUENCE unstuck_idem_fence_seq;

CREATE TABLE unstuck_idem_record (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope            text        NOT NULL
        CONSTRAINT unstuck_idem_record_scope_check CHECK (scope <> '' AND octet_length(scope) <= 255),
    operation        text        NOT NULL
        CONSTRAINT unstuck_idem_record_operation_check CHECK (operation <> ''),
    key_digest       text        NOT NULL
        CONSTRAINT unstuck_idem_record_key_digest_check CHECK (length(key_digest) = 64),
    fingerprint      text        NOT NULL DEFAULT '',
    status           text        NOT NULL
        CONSTRAINT unstuck_idem_record_status_check
        CHECK (status IN ('processing', 'completed', 'failed', 'pending', 'unavailable')),
    result           bytea       NULL,
    response_code    integer     NOT NULL DEFAULT 0,
    correlation_id   text        NOT NULL DEFAULT '',
    external_ref     text        NOT NULL DEFAULT '',
    resource_ids     text[]      NOT NULL DEFAULT '{}',
    last_error       text        NOT NULL DEFAULT '',
    owner_token      text        NOT NULL DEFAULT '',
    fence            bigint      NOT NULL,
    lease_expires_at timestamptz NULL,
    attempts         integer     NOT NULL DEFAULT 1,
    version          bigint      NOT NULL DEFAULT 1,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    expires_at       timestamptz NOT NULL,
    CONSTRAINT unstuck_idem_record_lease_check CHECK (status <> 'processing' OR lease_expires_at IS NOT NULL),
    CONSTRAINT unstuck_idem_record_ident_key UNIQUE (scope, operation, key_digest)
);

-- The console's lists by status, newest change first or last, paged by key.
CREATE INDEX unstuck_idem_record_status_idx ON unstuck_idem_record (status, updated_at, id);
-- Sweep.
CREATE INDEX unstuck_idem_record_expires_at_idx ON unstuck_idem_record (expires_at);
-- Look-ups by the references a running owner attaches.
CREATE INDEX unstuck_idem_record_correlation_id_idx ON unstuck_idem_record (correlation_id)
    WHERE correlation_id <> '';
CREATE INDEX unstuck_idem_record_external_ref_idx ON unstuck_idem_record (external_ref)
    WHERE external_ref <> '';
