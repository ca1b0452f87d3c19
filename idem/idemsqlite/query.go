package idemsqlite

// The SQL of the idem store, in one place. Timestamps are bound and read as
// Unix microseconds, UTC (see migration/idem/001_records.up.sql).

// recordColumns is the column list every query returning a record selects,
// in the order scanRecord reads them.
const recordColumns = `id, scope, operation, key_digest, fingerprint, status, result,
    response_code, correlation_id, external_ref, resource_ids, last_error,
    owner_token, fence, lease_expires_at, attempts, version,
    created_at, updated_at, expires_at, key_hash, trace_id`

// leanColumns are the columns of a lean Reserve (idemdriver.LeanFields
// without the ident, which the caller gave), in the order scanLean and
// decodeLean read them, named as leanColumnNames. Each is a unary plus
// named by one letter: modernc.org/sqlite makes a Go string of every
// column's name and declared type on every query, and a one-byte name and
// an expression's absent type need none (18 allocations fewer per read).
// The unary plus changes no value.
const leanColumns = `+id AS a, +fingerprint AS b, +status AS c, +result AS d, +owner_token AS e,
    +fence AS f, +lease_expires_at AS g, +created_at AS h, +expires_at AS i`

// leanColumnCount is how many columns leanColumns has.
const leanColumnCount = 9

// leanColumnNames are the table's names of leanColumns, for errors.
var leanColumnNames = [leanColumnCount]string{"id", "fingerprint", "status", "result", "owner_token",
	"fence", "lease_expires_at", "created_at", "expires_at"}

const (
	// queryGet takes scope, operation, key_digest.
	queryGet = `SELECT ` + recordColumns + `
FROM unstuck_idem_record
WHERE scope = ? AND operation = ? AND key_digest = ?`

	// queryNextFence hands out the next fence. It must run in the write
	// transaction that stores the fence.
	queryNextFence = `UPDATE unstuck_idem_fence SET value = value + 1 WHERE id = 1 RETURNING value`

	// queryInsert creates a processing record unless one exists for the
	// ident, taking the next fence from the counter: the trigger of
	// migration 002 stores it back in the same statement, under the write
	// lock. It returns no row when the ident has a record; the trigger
	// does not run then, so no fence is burnt. It takes scope, operation,
	// key_digest, fingerprint, owner_token, lease_expires_at, created_at
	// (also updated_at), expires_at, key_hash ("" stores NULL), trace_id.
	queryInsert = `INSERT INTO unstuck_idem_record (
    scope, operation, key_digest, fingerprint, status, owner_token, fence,
    lease_expires_at, attempts, version, created_at, updated_at, expires_at, key_hash, trace_id
) VALUES (?1, ?2, ?3, ?4, 'processing', ?5,
    (SELECT value + 1 FROM unstuck_idem_fence WHERE id = 1), ?6, 1, 1, ?7, ?7, ?8, nullif(?9, ''), ?10)
ON CONFLICT (scope, operation, key_digest) DO NOTHING
RETURNING ` + recordColumns

	// queryGetLean is queryGet narrowed to leanColumns.
	queryGetLean = `SELECT ` + leanColumns + `
FROM unstuck_idem_record
WHERE scope = ? AND operation = ? AND key_digest = ?`

	// queryInsertLean is queryInsert returning only what the database
	// chooses, the id and the fence: every other column of the record it
	// creates is a value the caller bound or the insert fixes.
	queryInsertLean = `INSERT INTO unstuck_idem_record (
    scope, operation, key_digest, fingerprint, status, owner_token, fence,
    lease_expires_at, attempts, version, created_at, updated_at, expires_at, key_hash, trace_id
) VALUES (?1, ?2, ?3, ?4, 'processing', ?5,
    (SELECT value + 1 FROM unstuck_idem_fence WHERE id = 1), ?6, 1, 1, ?7, ?7, ?8, nullif(?9, ''), ?10)
ON CONFLICT (scope, operation, key_digest) DO NOTHING
RETURNING +id AS a, +fence AS b` // named as leanColumns are, for the same reason

	// queryTakeoverCheck finds the id of a record that may be taken over:
	// still under the seen owner and fence, with no live lease, and not
	// pending. It takes scope, operation, key_digest, owner_token, fence,
	// now.
	queryTakeoverCheck = `SELECT id FROM unstuck_idem_record
WHERE scope = ? AND operation = ? AND key_digest = ?
  AND owner_token = ? AND fence = ?
  AND (lease_expires_at IS NULL OR lease_expires_at <= ?)
  AND status <> 'pending'`

	// queryTakeover takes owner_token, fence, lease_expires_at, now,
	// trace_id, id.
	queryTakeover = `UPDATE unstuck_idem_record SET
    owner_token = ?, fence = ?, status = 'processing', lease_expires_at = ?,
    attempts = attempts + 1, version = version + 1, updated_at = ?, trace_id = ?
WHERE id = ?
RETURNING ` + recordColumns

	// queryTakeoverFresh restarts the record as if first seen. It takes
	// owner_token, fence, lease_expires_at, now (updated_at and created_at),
	// fingerprint, expires_at, trace_id, id.
	queryTakeoverFresh = `UPDATE unstuck_idem_record SET
    owner_token = ?, fence = ?, status = 'processing', lease_expires_at = ?,
    attempts = 1, version = version + 1, updated_at = ?4, created_at = ?4,
    fingerprint = ?, expires_at = ?, trace_id = ?,
    result = NULL, response_code = 0, correlation_id = '', external_ref = '',
    last_error = '', resource_ids = '[]'
WHERE id = ?
RETURNING ` + recordColumns

	// queryComplete takes status, result, response_code, last_error, now,
	// then the owner check: scope, operation, key_digest, owner_token,
	// fence.
	queryComplete = `UPDATE unstuck_idem_record SET
    status = ?, result = ?, response_code = ?, last_error = ?,
    lease_expires_at = NULL, version = version + 1, updated_at = ?
WHERE scope = ? AND operation = ? AND key_digest = ?
  AND owner_token = ? AND fence = ? AND status = 'processing'`

	// querySettle applies an operator's decision if the version is still
	// the one the operator saw; it ends the lease, clears the owner and the
	// result. It takes status, external_ref (kept when empty), last_error,
	// now, then scope, operation, key_digest, version.
	querySettle = `UPDATE unstuck_idem_record SET
    status = ?1, result = NULL,
    external_ref = CASE WHEN ?2 <> '' THEN ?2 ELSE external_ref END,
    last_error = ?3, owner_token = '', lease_expires_at = NULL,
    version = version + 1, updated_at = ?4
WHERE scope = ?5 AND operation = ?6 AND key_digest = ?7 AND version = ?8
RETURNING ` + recordColumns

	// queryAnnotate replaces correlation_id and external_ref when the
	// argument is not empty and appends the JSON array argument to
	// resource_ids. It takes correlation_id, external_ref, resource_ids
	// (JSON), now, then the owner check: scope, operation, key_digest,
	// owner_token, fence.
	queryAnnotate = `UPDATE unstuck_idem_record SET
    correlation_id = COALESCE(NULLIF(?, ''), correlation_id),
    external_ref = COALESCE(NULLIF(?, ''), external_ref),
    resource_ids = (
        SELECT json_group_array(value ORDER BY src, key) FROM (
            SELECT 0 AS src, key, value FROM json_each(unstuck_idem_record.resource_ids)
            UNION ALL
            SELECT 1 AS src, key, value FROM json_each(?)
        )
    ),
    version = version + 1, updated_at = ?
WHERE scope = ? AND operation = ? AND key_digest = ?
  AND owner_token = ? AND fence = ? AND status = 'processing'`

	// queryExtend moves a running record's lease to at least the given end,
	// never shortening it, and keeps the retention at least as long. It
	// takes lease end, now, then the owner check: scope, operation,
	// key_digest, owner_token, fence.
	queryExtend = `UPDATE unstuck_idem_record SET
    lease_expires_at = max(lease_expires_at, ?1), expires_at = max(expires_at, ?1),
    version = version + 1, updated_at = ?2
WHERE scope = ?3 AND operation = ?4 AND key_digest = ?5
  AND owner_token = ?6 AND fence = ?7 AND status = 'processing'
RETURNING lease_expires_at`

	// querySweepEscalate makes pending, up to a limit and oldest retention
	// first, the abandoned records whose retention has ended: processing
	// under a lease that ended. The reason is that of
	// idem.AbandonedReason(lease end, "sweep"); the owner is cleared. It
	// takes now, limit.
	querySweepEscalate = `UPDATE unstuck_idem_record SET
    status = 'pending',
    last_error = 'abandoned: the owner''s lease ended at '
        || strftime('%Y-%m-%dT%H:%M:%SZ', lease_expires_at / 1000000, 'unixepoch')
        || ' without an outcome (recovery: sweep)',
    owner_token = '', lease_expires_at = NULL,
    version = version + 1, updated_at = ?1
WHERE id IN (
    SELECT id FROM unstuck_idem_record
    WHERE expires_at <= ?1
      AND status = 'processing' AND lease_expires_at <= ?1
    ORDER BY expires_at, id
    LIMIT ?2
)`

	// querySweep deletes, oldest retention first, up to a limit of
	// finished records (completed, failed, unavailable) whose retention has
	// ended. It takes now, limit. It names status <> 'pending', the
	// condition of the sweep's partial index, so that SQLite may read it.
	querySweep = `DELETE FROM unstuck_idem_record WHERE id IN (
    SELECT id FROM unstuck_idem_record
    WHERE expires_at <= ?1 AND status <> 'pending'
      AND status NOT IN ('pending', 'processing')
    ORDER BY expires_at, id
    LIMIT ?2
)`
)
