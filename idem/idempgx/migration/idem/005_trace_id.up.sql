-- The OpenTelemetry trace ID of the call that created the record or last
-- took it over (issue 15, SPEC K18): '' when that call was not traced.
-- A constant default: no table rewrite on PostgreSQL 11 and later.
ALTER TABLE unstuck_idem_record ADD COLUMN IF NOT EXISTS trace_id text NOT NULL DEFAULT ''
    CHECK (trace_id = '' OR trace_id ~ '^[0-9a-f]{32}$');
