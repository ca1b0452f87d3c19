-- The OpenTelemetry trace ID of the call that created the record or last
-- took it over (issue 15, SPEC K18): '' when that call was not traced.
ALTER TABLE unstuck_idem_record ADD COLUMN trace_id TEXT NOT NULL DEFAULT ''
    CHECK (trace_id = '' OR (length(trace_id) = 32 AND trace_id NOT GLOB '*[^0-9a-f]*'));
