package idemmysql

// The SQL of the idem store, in one place. Timestamps are Unix
// microseconds, UTC (see migration/idem/001_records.up.sql). MySQL 8 has
// no RETURNING, so a write that must hand back a record reads it after
// writing, in the same transaction.

// dbNow is the database's clock in Unix microseconds. UTC_TIMESTAMP is
// evaluated once per statement, so every use in one statement is the same
// instant, and it does not depend on the session's time_zone.
const dbNow = `CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) AS SIGNED)`

// nowOr is the clock of a statement: the bound argument (a caller's Now,
// in µs) or, when it is NULL, the database's clock.
const nowOr = `COALESCE(?, ` + dbNow + `)`

// recordColumns is the column list every query returning a record selects,
// after the clock, in the order scanRecord reads them.
const recordColumns = `r.id, r.scope, r.operation, r.key_digest, r.fingerprint, r.status, r.result,
    r.response_code, r.correlation_id, r.external_ref, r.resource_ids, r.last_error,
    r.owner_token, r.fence, r.lease_expires_at, r.attempts, r.version,
    r.created_at, r.updated_at, r.expires_at, r.key_hash, r.trace_id`

const (
	// queryGet reads the clock and the record of an ident: always one
	// row, whose record columns are NULL when there is no record. It takes
	// now (NULL for the database's clock), scope, operation, key_digest.
	queryGet = `SELECT ` + nowOr + `, ` + recordColumns + `
FROM (SELECT 1 AS one) AS clock
LEFT JOIN unstuck_idem_record AS r ON r.scope = ? AND r.operation = ? AND r.key_digest = ?`

	// queryGetLean is queryGet narrowed to the clock and
	// idemdriver.LeanFields without the ident (which the caller gave), in
	// the order scanLean reads them: what a repeat's decision and replay
	// read.
	queryGetLean = `SELECT ` + nowOr + `, r.id, r.fingerprint, r.status, r.result, r.owner_token, r.fence,
    r.lease_expires_at, r.created_at, r.expires_at
FROM (SELECT 1 AS one) AS clock
LEFT JOIN unstuck_idem_record AS r ON r.scope = ? AND r.operation = ? AND r.key_digest = ?`

	// queryGetLocking is queryGet as a locking read: it sees the latest
	// committed record whatever the transaction's isolation, and waits
	// for a transaction that is inserting it. Reserve inside a
	// transaction uses it after its insert met an existing record.
	queryGetLocking = queryGet + `
LOCK IN SHARE MODE`

	// queryNextFence takes a new fence: its AUTO_INCREMENT value.
	queryNextFence = `INSERT INTO unstuck_idem_fence () VALUES ()`

	// queryRaiseFence makes the fence counter higher than a fence given:
	// an explicit value raises AUTO_INCREMENT past it.
	queryRaiseFence = `INSERT INTO unstuck_idem_fence (fence) VALUES (?) ON DUPLICATE KEY UPDATE fence = fence`

	// queryMaxFence and queryTrimFences keep only the highest fence row.
	queryMaxFence   = `SELECT COALESCE(MAX(fence), 0) FROM unstuck_idem_fence`
	queryTrimFences = `DELETE FROM unstuck_idem_fence WHERE fence < ?`

	// queryInsert creates a processing record with fence 0, which the
	// trigger of migration 001 replaces with a new fence in the same
	// statement. The unique key on the ident refuses a second record
	// (error 1062). It takes scope, operation, key_digest, fingerprint,
	// owner_token, lease_expires_at, created_at, updated_at, expires_at,
	// key_hash ("" stores NULL), trace_id.
	queryInsert = `INSERT INTO unstuck_idem_record (
    scope, operation, key_digest, fingerprint, status, result, response_code,
    correlation_id, external_ref, resource_ids, last_error, owner_token, fence,
    lease_expires_at, attempts, version, created_at, updated_at, expires_at, key_hash, trace_id
) VALUES (?, ?, ?, ?, 'processing', NULL, 0, '', '', '[]', '', ?, 0, ?, 1, 1, ?, ?, ?, NULLIF(?, ''), ?)`

	// queryFenceOf reads the fence the trigger gave a record; it takes
	// the id.
	queryFenceOf = `SELECT fence FROM unstuck_idem_record WHERE id = ?`

	// queryTakeover gives a record to a new owner if it is still under the
	// seen owner and fence, holds no live lease and is not pending. It
	// takes owner_token, fence, trace_id, lease (µs), now, now, then
	// scope, operation, key_digest, seen owner_token, seen fence, now.
	queryTakeover = `UPDATE unstuck_idem_record SET
    owner_token = ?, fence = ?, trace_id = ?, status = 'processing', lease_expires_at = ` + nowOr + ` + ?,
    attempts = attempts + 1, version = version + 1, updated_at = ` + nowOr + `
WHERE scope = ? AND operation = ? AND key_digest = ?
  AND owner_token = ? AND fence = ?
  AND (lease_expires_at IS NULL OR lease_expires_at <= ` + nowOr + `)
  AND status <> 'pending'`

	// queryTakeoverFresh is queryTakeover restarting the record as if
	// first seen. It takes owner_token, fence, trace_id, now, lease (µs),
	// now, now, fingerprint, now, retention (µs), then as queryTakeover's
	// WHERE.
	queryTakeoverFresh = `UPDATE unstuck_idem_record SET
    owner_token = ?, fence = ?, trace_id = ?, status = 'processing', lease_expires_at = ` + nowOr + ` + ?,
    attempts = 1, version = version + 1, updated_at = ` + nowOr + `, created_at = ` + nowOr + `,
    fingerprint = ?, expires_at = ` + nowOr + ` + ?,
    result = NULL, response_code = 0, correlation_id = '', external_ref = '',
    last_error = '', resource_ids = '[]'
WHERE scope = ? AND operation = ? AND key_digest = ?
  AND owner_token = ? AND fence = ?
  AND (lease_expires_at IS NULL OR lease_expires_at <= ` + nowOr + `)
  AND status <> 'pending'`

	// queryComplete takes status, result, response_code, last_error, now,
	// then the owner check: scope, operation, key_digest, owner_token,
	// fence. version always changes, so a matched row is a changed row.
	queryComplete = `UPDATE unstuck_idem_record SET
    status = ?, result = ?, response_code = ?, last_error = ?,
    lease_expires_at = NULL, version = version + 1, updated_at = ` + nowOr + `
WHERE scope = ? AND operation = ? AND key_digest = ?
  AND owner_token = ? AND fence = ? AND status = 'processing'`

	// querySettle applies an operator's decision if the version is still
	// the one the operator saw; it ends the lease, clears the owner and the
	// result. It takes status, external_ref (kept when empty), last_error,
	// now, then scope, operation, key_digest, version.
	querySettle = `UPDATE unstuck_idem_record SET
    status = ?, result = NULL,
    external_ref = COALESCE(NULLIF(?, ''), external_ref),
    last_error = ?, owner_token = '', lease_expires_at = NULL,
    version = version + 1, updated_at = ` + nowOr + `
WHERE scope = ? AND operation = ? AND key_digest = ? AND version = ?`

	// queryAnnotate replaces correlation_id and external_ref when the
	// argument is not empty and appends the JSON array argument to
	// resource_ids. It takes correlation_id, external_ref, resource_ids
	// (JSON), now, then the owner check: scope, operation, key_digest,
	// owner_token, fence.
	queryAnnotate = `UPDATE unstuck_idem_record SET
    correlation_id = COALESCE(NULLIF(?, ''), correlation_id),
    external_ref = COALESCE(NULLIF(?, ''), external_ref),
    resource_ids = JSON_MERGE_PRESERVE(resource_ids, ?),
    version = version + 1, updated_at = ` + nowOr + `
WHERE scope = ? AND operation = ? AND key_digest = ?
  AND owner_token = ? AND fence = ? AND status = 'processing'`

	// queryExtend moves a running record's lease to at least now + lease,
	// never shortening it, and keeps the retention at least as long. The
	// new lease end is handed back through LAST_INSERT_ID(expr), which the
	// server returns with the statement's result: one round trip, no read.
	// It takes now, lease (µs), now, lease, now, then the owner check:
	// scope, operation, key_digest, owner_token, fence.
	queryExtend = `UPDATE unstuck_idem_record SET
    expires_at = GREATEST(expires_at, ` + nowOr + ` + ?),
    lease_expires_at = LAST_INSERT_ID(GREATEST(lease_expires_at, ` + nowOr + ` + ?)),
    version = version + 1, updated_at = ` + nowOr + `
WHERE scope = ? AND operation = ? AND key_digest = ?
  AND owner_token = ? AND fence = ? AND status = 'processing'`

	// queryClock reads the clock of a statement: now, or the database's.
	queryClock = `SELECT ` + nowOr

	// querySweepEscalate makes pending, up to a limit and oldest retention
	// first, the abandoned records whose retention has ended: processing
	// under a lease that ended. The reason is that of
	// idemdriver.AbandonedReason(lease end, "sweep"); the owner is
	// cleared. It takes now, now, now, limit.
	querySweepEscalate = `UPDATE unstuck_idem_record SET
    status = 'pending',
    last_error = CONCAT('abandoned: the owner''s lease ended at ',
        DATE_FORMAT(TIMESTAMPADD(SECOND, lease_expires_at DIV 1000000, '1970-01-01 00:00:00'), '%Y-%m-%dT%H:%i:%sZ'),
        ' without an outcome (recovery: sweep)'),
    owner_token = '', lease_expires_at = NULL,
    version = version + 1, updated_at = ?
WHERE expires_at <= ? AND status = 'processing' AND lease_expires_at <= ?
ORDER BY expires_at, id
LIMIT ?`

	// querySweep deletes, oldest retention first, up to a limit of
	// finished records (completed, failed, unavailable) whose retention has
	// ended. It takes now, limit.
	querySweep = `DELETE FROM unstuck_idem_record
WHERE expires_at <= ? AND status NOT IN ('pending', 'processing')
ORDER BY expires_at, id
LIMIT ?`
)
