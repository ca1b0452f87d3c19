package idempgx

import "fmt"

// The store's SQL: each statement is one store call, or one step of
// Reserve, run alone in autocommit by the Store or inside the application's
// transaction by WithinTx. Names are unqualified: they resolve in the
// pool's search_path.
//
// Conventions of every statement:
//   - The clock is coalesce($now::timestamptz, statement_timestamp()): the
//     caller's Now when one was given (tests), else the start of the
//     statement by the database's clock. statement_timestamp(), not now():
//     inside WithinTx now() would be the start of the transaction, and a
//     call late in a long transaction would judge leases by a stale clock;
//     in autocommit the two are equal. The same value is returned as the
//     last column (read_at), so a record's ReadAt is the clock the statement
//     judged it by.
//   - Durations are bigint microseconds, turned into intervals with
//     "* interval '1 microsecond'": an interval of pure time, so that adding
//     it never crosses a daylight-saving change as a calendar day would.
//   - Writes by an owner are compare-and-swaps on (owner_token, fence) and
//     status 'processing'; a write that matches no row changed nothing.
//     They test the status with "IS NOT DISTINCT FROM 'processing'", the
//     same as "=" on a column that is never NULL, but which no index
//     predicate or key matches: with "=", PostgreSQL takes the
//     partial indexes of processing records (unstuck_console_idem_processing*,
//     for the console) for a statement that names the record's ident,
//     whenever its statistics say few records are processing (always, in
//     steady traffic, or on a table not yet analyzed), and walks every
//     processing entry of the scope, dead ones included, instead of one
//     entry of the unique ident index.

// recordColumns are the columns scanned by scanRecord, in its order; every
// statement returning a record appends the clock as read_at.
const recordColumns = `id, scope, operation, key_digest, fingerprint, status, result, response_code,
    correlation_id, external_ref, resource_ids, last_error, owner_token, fence, lease_expires_at,
    attempts, version, created_at, updated_at, expires_at, key_hash, trace_id`

// reserveOrGetSQL is the first step of Reserve, one round trip whether
// the key is new or not: it reads the record and, only when the read finds
// none, inserts a processing record. It returns the
// record with created = true when it inserted it, the existing record
// with created = false, or no row when the insert met a record that the
// read's snapshot did not see (a concurrent reservation committed in
// between; the caller reads it with getSQL). When the read finds a record
// the INSERT's SELECT yields no row: nextval is not evaluated and nothing
// is written, so a replay costs no WAL and burns no fence. nextval is
// evaluated when the insert meets a conflict and does nothing, so a
// sequence value is burnt then: fences have gaps, which is allowed, as
// they only need to increase strictly.
//
// $1 scope, $2 operation, $3 key_digest, $4 fingerprint, $5 owner_token,
// $6 lease µs, $7 ttl µs, $8 now, $9 key_hash ("" stores NULL), $10 trace_id.
var reserveOrGetSQL = reserveOneStatement(recordColumns)

// leanColumns are the columns of a lean Reserve (idemdriver.LeanFields
// without the ident, which the caller gave), scanned by scanLean.
const leanColumns = `id, fingerprint, status, result, owner_token, fence, lease_expires_at, created_at, expires_at`

// insertRecord is the insert of every Reserve: a processing record with a
// fence from the sequence, or no row when a record exists (ON CONFLICT DO
// NOTHING; the sequence value is burnt then, which is allowed: fences only
// need to increase). A record it inserts has every other column at a value
// the insert fixes (the defaults, attempts and version 1, updated_at =
// created_at, the key hash given), so scanLean rebuilds it whole.
const insertRecord = `INSERT INTO unstuck_idem_record (
    scope, operation, key_digest, fingerprint, status, owner_token, fence,
    lease_expires_at, attempts, version, created_at, updated_at, expires_at, key_hash, trace_id)
SELECT $1::text, $2::text, $3::text, $4::text, 'processing', $5::text, nextval('unstuck_idem_fence_seq'),
    coalesce($8::timestamptz, statement_timestamp()) + $6::bigint * interval '1 microsecond',
    1, 1,
    coalesce($8::timestamptz, statement_timestamp()),
    coalesce($8::timestamptz, statement_timestamp()),
    coalesce($8::timestamptz, statement_timestamp()) + greatest($6::bigint, $7::bigint) * interval '1 microsecond',
    nullif($9::text, ''), $10::text`

// insertLeanSQL is the insert of a lean Reserve that has read first
// (getLeanSQL) and missed: insertRecord returning leanColumns, created
// (true) and the clock, or no row when a record exists.
//
// Same parameters as reserveOrGetSQL.
const insertLeanSQL = insertRecord + `
ON CONFLICT (scope, operation, key_digest) DO NOTHING
RETURNING ` + leanColumns + `, true, coalesce($8::timestamptz, statement_timestamp())`

// reserveLeanSQL is a lean Reserve in one statement: it reads
// leanColumns of the record and, only when the read finds none, inserts
// (insertRecord). It returns one row of leanColumns, created and the clock:
// the new record with created = true, the existing one with created =
// false, or no row when the insert met a record that the read's snapshot
// did not see (the caller reads it with getLeanSQL). When the read finds
// a record the INSERT's SELECT yields no row: nextval is not evaluated and
// nothing is written, so a replay writes no WAL and burns no fence. A new
// key costs one round trip, as the limit's INSERT does; a replay costs a
// little more on the server than getLeanSQL alone (see Store.Reserve for
// when each is used).
//
// Same parameters as reserveOrGetSQL.
var reserveLeanSQL = reserveOneStatement(leanColumns)

// reserveOneStatement returns the statement of a Reserve in one round
// trip, reserveOrGetSQL or reserveLeanSQL, returning columns.
func reserveOneStatement(columns string) string {
	return `WITH existing AS (
    SELECT ` + columns + `
    FROM unstuck_idem_record
    WHERE scope = $1 AND operation = $2 AND key_digest = $3),
inserted AS (
    ` + insertRecord + `
    WHERE NOT EXISTS (SELECT 1 FROM existing)
    ON CONFLICT (scope, operation, key_digest) DO NOTHING
    RETURNING ` + columns + `)
SELECT ` + columns + `, true, coalesce($8::timestamptz, statement_timestamp()) FROM inserted
UNION ALL
SELECT ` + columns + `, false, coalesce($8::timestamptz, statement_timestamp()) FROM existing`
}

// getLeanSQL reads leanColumns of one record, created (false) and the
// clock: the first step of a lean Reserve, and its read after an insert
// that met a record.
//
// $1 scope, $2 operation, $3 key_digest, $4 now.
const getLeanSQL = `SELECT ` + leanColumns + `, false, coalesce($4::timestamptz, statement_timestamp())
FROM unstuck_idem_record
WHERE scope = $1 AND operation = $2 AND key_digest = $3`

// getSQL reads one record.
//
// $1 scope, $2 operation, $3 key_digest, $4 now.
const getSQL = `SELECT ` + recordColumns + `, coalesce($4::timestamptz, statement_timestamp())
FROM unstuck_idem_record
WHERE scope = $1 AND operation = $2 AND key_digest = $3`

// takeoverSQL hands a record whose lease has ended (or that has none) to a
// new owner with a new fence, keeping its retention at least as long as the
// new lease. A pending record is never taken over: only reconciliation or
// an operator ends it. nextval runs only for the row updated.
//
// $1 scope, $2 operation, $3 key_digest, $4 seen owner_token, $5 seen fence,
// $6 new owner_token, $7 lease µs, $8 now, $9 trace_id.
const takeoverSQL = `UPDATE unstuck_idem_record SET
    owner_token = $6,
    trace_id = $9,
    fence = nextval('unstuck_idem_fence_seq'),
    status = 'processing',
    lease_expires_at = coalesce($8::timestamptz, statement_timestamp()) + $7::bigint * interval '1 microsecond',
    expires_at = greatest(expires_at, coalesce($8::timestamptz, statement_timestamp()) + $7::bigint * interval '1 microsecond'),
    attempts = attempts + 1,
    version = version + 1,
    updated_at = coalesce($8::timestamptz, statement_timestamp())
WHERE scope = $1 AND operation = $2 AND key_digest = $3
    AND owner_token = $4 AND fence = $5
    AND status <> 'pending'
    AND (lease_expires_at IS NULL OR lease_expires_at <= coalesce($8::timestamptz, statement_timestamp()))
RETURNING ` + recordColumns + `, coalesce($8::timestamptz, statement_timestamp())`

// takeoverFreshSQL is takeoverSQL that also restarts the record as if first
// seen: new fingerprint, creation and retention from now, attempts back to
// 1, result and annotations cleared.
//
// $1 scope, $2 operation, $3 key_digest, $4 seen owner_token, $5 seen fence,
// $6 new owner_token, $7 lease µs, $8 now, $9 fingerprint, $10 ttl µs,
// $11 trace_id.
const takeoverFreshSQL = `UPDATE unstuck_idem_record SET
    owner_token = $6,
    trace_id = $11,
    fence = nextval('unstuck_idem_fence_seq'),
    status = 'processing',
    lease_expires_at = coalesce($8::timestamptz, statement_timestamp()) + $7::bigint * interval '1 microsecond',
    fingerprint = $9,
    created_at = coalesce($8::timestamptz, statement_timestamp()),
    expires_at = coalesce($8::timestamptz, statement_timestamp()) + greatest($7::bigint, $10::bigint) * interval '1 microsecond',
    attempts = 1,
    result = NULL,
    response_code = 0,
    correlation_id = '',
    external_ref = '',
    resource_ids = '{}',
    last_error = '',
    version = version + 1,
    updated_at = coalesce($8::timestamptz, statement_timestamp())
WHERE scope = $1 AND operation = $2 AND key_digest = $3
    AND owner_token = $4 AND fence = $5
    AND status <> 'pending'
    AND (lease_expires_at IS NULL OR lease_expires_at <= coalesce($8::timestamptz, statement_timestamp()))
RETURNING ` + recordColumns + `, coalesce($8::timestamptz, statement_timestamp())`

// completeSQL writes an owner's final state and ends its lease.
//
// $1 scope, $2 operation, $3 key_digest, $4 owner_token, $5 fence,
// $6 status, $7 result, $8 response_code, $9 last_error, $10 now.
var completeSQL = `UPDATE unstuck_idem_record SET ` + completeSet(6) + `
WHERE scope = $1 AND operation = $2 AND key_digest = $3
    AND owner_token = $4 AND fence = $5
    AND status IS NOT DISTINCT FROM 'processing'`

// completeSet is what a completion writes, from the parameters numbered
// from n on: status, result, response_code, last_error and now.
func completeSet(n int) string {
	return fmt.Sprintf(`
    status = $%d,
    result = $%d,
    response_code = $%d,
    last_error = $%d,
    lease_expires_at = NULL,
    version = version + 1,
    updated_at = coalesce($%d::timestamptz, statement_timestamp())`, n, n+1, n+2, n+3, n+4)
}

// completeByIDSQL is completeSQL finding the record by its primary key
// (idemdriver.Completion.RecordID): a look-up that no plan turns into a
// scan, even on a table without statistics (BENCHMARKS.md, "A table
// without statistics"); as fast as by ident otherwise. The row must still
// have the ident's digest (which hashes scope and operation with the key)
// and the owner, so a wrong ID changes nothing. The scope and operation
// are not compared: with them PostgreSQL plans by the ident's columns
// again, where missing statistics can mislead it.
//
// $1 id, $2 key_digest, $3 owner_token, $4 fence, then completeSet's
// from $5.
var completeByIDSQL = `UPDATE unstuck_idem_record SET ` + completeSet(5) + `
WHERE id = $1 AND key_digest = $2 AND owner_token = $3 AND fence = $4
    AND status IS NOT DISTINCT FROM 'processing'`

// annotateSQL attaches references to a running record: an empty reference
// keeps the stored one, resource ids are appended.
//
// $1 scope, $2 operation, $3 key_digest, $4 owner_token, $5 fence,
// $6 correlation_id, $7 external_ref, $8 resource_ids, $9 now.
const annotateSQL = `UPDATE unstuck_idem_record SET
    correlation_id = CASE WHEN $6::text <> '' THEN $6::text ELSE correlation_id END,
    external_ref = CASE WHEN $7::text <> '' THEN $7::text ELSE external_ref END,
    resource_ids = array_cat(resource_ids, coalesce($8::text[], '{}')),
    version = version + 1,
    updated_at = coalesce($9::timestamptz, statement_timestamp())
WHERE scope = $1 AND operation = $2 AND key_digest = $3
    AND owner_token = $4 AND fence = $5
    AND status IS NOT DISTINCT FROM 'processing'`

// releaseSQL deletes a running record for its owner, so the key may run
// again.
//
// $1 scope, $2 operation, $3 key_digest, $4 owner_token, $5 fence.
const releaseSQL = `DELETE FROM unstuck_idem_record
WHERE scope = $1 AND operation = $2 AND key_digest = $3
    AND owner_token = $4 AND fence = $5
    AND status IS NOT DISTINCT FROM 'processing'`

// extendSQL moves a running record's lease to at least now + lease for its
// owner, never shortening it, and keeps the retention at least as long.
//
// $1 scope, $2 operation, $3 key_digest, $4 owner_token, $5 fence,
// $6 lease µs, $7 now.
const extendSQL = `UPDATE unstuck_idem_record SET
    lease_expires_at = greatest(lease_expires_at, coalesce($7::timestamptz, statement_timestamp()) + $6::bigint * interval '1 microsecond'),
    expires_at = greatest(expires_at, coalesce($7::timestamptz, statement_timestamp()) + $6::bigint * interval '1 microsecond'),
    version = version + 1,
    updated_at = coalesce($7::timestamptz, statement_timestamp())
WHERE scope = $1 AND operation = $2 AND key_digest = $3
    AND owner_token = $4 AND fence = $5
    AND status IS NOT DISTINCT FROM 'processing'
RETURNING lease_expires_at`

// settleSQL applies an operator's decision if the record is still at the
// version the operator saw: the lease ends, the owner is cleared (a late
// owner is fenced out) and no result is kept.
//
// $1 scope, $2 operation, $3 key_digest, $4 version, $5 status,
// $6 external_ref, $7 last_error, $8 now.
const settleSQL = `UPDATE unstuck_idem_record SET
    status = $5,
    result = NULL,
    external_ref = CASE WHEN $6::text <> '' THEN $6::text ELSE external_ref END,
    last_error = $7,
    owner_token = '',
    lease_expires_at = NULL,
    version = version + 1,
    updated_at = coalesce($8::timestamptz, statement_timestamp())
WHERE scope = $1 AND operation = $2 AND key_digest = $3 AND version = $4
RETURNING ` + recordColumns + `, coalesce($8::timestamptz, statement_timestamp())`

// deleteVersionSQL deletes a record if it is still at the version an
// operator saw.
//
// $1 scope, $2 operation, $3 key_digest, $4 version.
const deleteVersionSQL = `DELETE FROM unstuck_idem_record
WHERE scope = $1 AND operation = $2 AND key_digest = $3 AND version = $4`

// deleteSQL deletes a record whatever its state.
//
// $1 scope, $2 operation, $3 key_digest.
const deleteSQL = `DELETE FROM unstuck_idem_record
WHERE scope = $1 AND operation = $2 AND key_digest = $3`

// sweepSQL handles up to $1 records whose retention has ended, oldest
// first, never a pending one and never one processing under a live lease:
// finished records are deleted, abandoned ones (processing, lease ended)
// are made pending with the reason of idem.AbandonedReason(lease end,
// "sweep") and their owner cleared. The candidates are locked in the first
// CTE (FOR UPDATE), which re-checks them against their newest version:
// without it, a record revived by a concurrent takeover after this
// statement's snapshot would still be changed. SKIP LOCKED lets concurrent
// sweeps, and sweeps racing an owner, pass each other. The candidates
// come from the sweep's partial index, which holds no pending record, and
// are changed by ID (= ANY of an array: the primary key's index, whatever
// the planner guesses of the candidates' number). It returns the numbers
// deleted and escalated.
//
// $1 limit, $2 now.
const sweepSQL = `WITH candidate AS (
    SELECT id, status FROM unstuck_idem_record
    WHERE expires_at <= coalesce($2::timestamptz, statement_timestamp())
        AND status <> 'pending'
        AND NOT (status = 'processing' AND lease_expires_at > coalesce($2::timestamptz, statement_timestamp()))
    ORDER BY expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED),
deleted AS (
    DELETE FROM unstuck_idem_record r
    WHERE r.id = ANY (ARRAY(SELECT id FROM candidate WHERE status <> 'processing'))
    RETURNING 1),
escalated AS (
    UPDATE unstuck_idem_record r SET
        status = 'pending',
        last_error = 'abandoned: the owner''s lease ended at '
            || to_char(r.lease_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
            || ' without an outcome (recovery: sweep)',
        owner_token = '',
        lease_expires_at = NULL,
        version = r.version + 1,
        updated_at = coalesce($2::timestamptz, statement_timestamp())
    WHERE r.id = ANY (ARRAY(SELECT id FROM candidate WHERE status = 'processing'))
    RETURNING 1)
SELECT (SELECT count(*) FROM deleted), (SELECT count(*) FROM escalated)`
