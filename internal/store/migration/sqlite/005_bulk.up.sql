-- Bulk decisions and four-eyes approvals (issue 14, SPEC K12, K13). A
-- request is one row; its items, fixed with their versions when it was
-- made, are rows of unstuck_console_bulk_item whose outcome is set in the
-- same transaction as the item's decision, so that a resumed run never
-- decides an item twice. A single decision waiting for approval is a
-- request of one item.
CREATE TABLE unstuck_console_bulk (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    kind            TEXT        NOT NULL,
    action          TEXT        NOT NULL,
    single          INTEGER     NOT NULL DEFAULT 0,
    filter          TEXT        NOT NULL,
    params          TEXT        NOT NULL,
    reason          TEXT        NOT NULL,
    requested_by    TEXT        NOT NULL,
    requested_role  TEXT        NOT NULL,
    status          TEXT        NOT NULL,
    total           INTEGER     NOT NULL,
    not_legal       INTEGER     NOT NULL DEFAULT 0,
    decided_by      TEXT        NOT NULL DEFAULT '',
    decision_reason TEXT        NOT NULL DEFAULT '',
    cancelled_by    TEXT        NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    expires_at      INTEGER,
    finished_at     INTEGER
);
CREATE INDEX unstuck_console_bulk_status ON unstuck_console_bulk (status, id);

CREATE TABLE unstuck_console_bulk_item (
    bulk_id    INTEGER NOT NULL REFERENCES unstuck_console_bulk (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    target_id  TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    step       TEXT    NOT NULL DEFAULT '',
    outcome    TEXT    NOT NULL DEFAULT 'pending',
    detail     TEXT    NOT NULL DEFAULT '',
    decided_at INTEGER,
    PRIMARY KEY (bulk_id, seq)
);
CREATE INDEX unstuck_console_bulk_item_pending ON unstuck_console_bulk_item (bulk_id, seq) WHERE outcome = 'pending';
CREATE INDEX unstuck_console_bulk_item_outcome ON unstuck_console_bulk_item (bulk_id, outcome, seq);
