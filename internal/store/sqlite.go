package store

// The SQLite half of the store: its SQL and the functions that run it.
// Every function takes a sqliteExecutor, the *sql.DB or a connection or
// transaction, and none begins or ends a transaction. As in idem/idemsqlite,
// timestamps are INTEGER Unix microseconds, UTC, and the clock is the
// process's: SQLite is embedded, so every reader and writer runs on one host.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	modernc "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// sqliteExecutor is what the statements run on: *sql.DB, *sql.Conn and
// *sql.Tx satisfy it.
type sqliteExecutor interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// sqliteClock is the process clock truncated to the microseconds SQLite
// keeps, so that a record's ReadAt compares with its stored times exactly
// as the queries do.
func sqliteClock() time.Time {
	return time.UnixMicro(time.Now().UnixMicro()).UTC()
}

// micros converts stored Unix microseconds to a UTC time.
func micros(us int64) time.Time {
	return time.UnixMicro(us).UTC()
}

// sqliteIdemTableExistsSQL tells whether the driver's migration has run.
const sqliteIdemTableExistsSQL = `SELECT EXISTS (
    SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'unstuck_idem_record')`

// ---- sessions

// sqliteDeleteExpiredSessionsSQL is sqlite3store's own cleanup statement.
const sqliteDeleteExpiredSessionsSQL = `DELETE FROM sessions WHERE expiry < julianday('now')`

func sqliteDeleteExpiredSessions(ctx context.Context, db sqliteExecutor) (int64, error) {
	res, err := db.ExecContext(ctx, sqliteDeleteExpiredSessionsSQL)
	if err != nil {
		return 0, sqliteMapError(err)
	}
	return res.RowsAffected()
}

// ---- users

const sqliteUserColumns = `id, username, role, password_hash, disabled, created_at, updated_at,
    source, coalesce(subject, ''), email, display_name`

// ?1 username, ?2 role, ?3 password_hash, ?4 now (µs).
const sqliteCreateUserSQL = `INSERT INTO unstuck_console_user (username, role, password_hash, disabled, created_at, updated_at)
VALUES (?1, ?2, ?3, 0, ?4, ?4)
RETURNING ` + sqliteUserColumns

const (
	sqliteUserByUsernameSQL = `SELECT ` + sqliteUserColumns + ` FROM unstuck_console_user WHERE username = ?1`
	sqliteUserByIDSQL       = `SELECT ` + sqliteUserColumns + ` FROM unstuck_console_user WHERE id = ?1`
	sqliteListUsersSQL      = `SELECT ` + sqliteUserColumns + ` FROM unstuck_console_user ORDER BY username`
)

// The updates of one column of a user: ?1 username, ?2 the new value, ?3
// now (µs).
const (
	sqliteSetUserDisabledSQL = `UPDATE unstuck_console_user SET disabled = ?2, updated_at = ?3 WHERE username = ?1`
	sqliteSetUserPasswordSQL = `UPDATE unstuck_console_user SET password_hash = ?2, updated_at = ?3 WHERE username = ?1`
	sqliteSetUserRoleSQL     = `UPDATE unstuck_console_user SET role = ?2, updated_at = ?3 WHERE username = ?1`
	sqliteTouchUserSQL       = `UPDATE unstuck_console_user SET updated_at = ?3 WHERE username = ?1` // ?2 unused
)

func sqliteCreateUser(ctx context.Context, db sqliteExecutor, username, role, hash string) (User, error) {
	u, err := sqliteScanUser(db.QueryRowContext(ctx, sqliteCreateUserSQL,
		username, role, hash, sqliteClock().UnixMicro()))
	if err != nil {
		return User{}, sqliteMapError(err)
	}
	return u, nil
}

// sqliteUserBy reads the user whose column ("username" or "id") is value.
func sqliteUserBy(ctx context.Context, db sqliteExecutor, column string, value any) (User, bool, error) {
	q := sqliteUserByIDSQL
	if column == "username" {
		q = sqliteUserByUsernameSQL
	}
	u, err := sqliteScanUser(db.QueryRowContext(ctx, q, value))
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, false, nil
	}
	if err != nil {
		return User{}, false, sqliteMapError(err)
	}
	return u, true, nil
}

// sqliteUpdateUser sets column of the user named username and reports
// whether there was one.
func sqliteUpdateUser(ctx context.Context, db sqliteExecutor, username, column string, value any) (bool, error) {
	var q string
	switch column {
	case "disabled":
		q = sqliteSetUserDisabledSQL
		if b, ok := value.(bool); ok {
			value = boolInt(b)
		}
	case "password_hash":
		q = sqliteSetUserPasswordSQL
	case "role":
		q = sqliteSetUserRoleSQL
	case "updated_at":
		q = sqliteTouchUserSQL
	default:
		return false, fmt.Errorf("no update of column %q", column)
	}
	res, err := db.ExecContext(ctx, q, username, value, sqliteClock().UnixMicro())
	if err != nil {
		return false, sqliteMapError(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	return n > 0, nil
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func sqliteListUsers(ctx context.Context, db sqliteExecutor) ([]User, error) {
	rows, err := db.QueryContext(ctx, sqliteListUsersSQL)
	if err != nil {
		return nil, sqliteMapError(err)
	}
	defer rows.Close()
	var us []User
	for rows.Next() {
		u, err := sqliteScanUser(rows)
		if err != nil {
			return nil, err
		}
		us = append(us, u)
	}
	if err := rows.Err(); err != nil {
		return nil, sqliteMapError(err)
	}
	return us, nil
}

func sqliteScanUser(row scanner) (User, error) {
	var (
		u                    User
		disabled             int64
		createdAt, updatedAt int64
	)
	if err := row.Scan(&u.ID, &u.Username, &u.Role, &u.PasswordHash, &disabled, &createdAt, &updatedAt,
		&u.Source, &u.Subject, &u.Email, &u.DisplayName); err != nil {
		return User{}, err
	}
	u.Disabled = disabled != 0
	u.CreatedAt = micros(createdAt)
	u.UpdatedAt = micros(updatedAt)
	return u, nil
}

// ---- keys: the read model of unstuck_idem_record, which it never writes

// sqliteRecordColumns are idem/idemsqlite's recordColumns, in
// sqliteScanRecord's order.
const sqliteRecordColumns = `id, scope, operation, key_digest, fingerprint, status, result,
    response_code, correlation_id, external_ref, resource_ids, last_error,
    owner_token, fence, lease_expires_at, attempts, version,
    created_at, updated_at, expires_at`

// ?1 id.
const sqliteKeySQL = `SELECT ` + sqliteRecordColumns + `
FROM unstuck_idem_record
WHERE id = ?1`

// sqliteListKeysSQL returns the list query of q and its arguments, with now
// (µs) as the clock that judges leases: newest change first, keyset on
// (updated_at, id), one row more than the page.
func sqliteListKeysSQL(q keyQuery, now time.Time) (string, []any) {
	w := where{
		placeholder: question,
		timeArg:     func(t time.Time) any { return t.UnixMicro() },
		now:         func(w *where) string { return w.arg(now.UnixMicro()) },
	}
	w.keys(q)
	sql := `SELECT ` + sqliteRecordColumns + `
FROM unstuck_idem_record
` + w.sql() + `
ORDER BY updated_at DESC, id DESC
LIMIT ` + w.arg(q.Limit+1)
	return sql, w.args
}

// sqliteNeedsAttentionSQL takes ?1 the limit, ?2 now (µs). SQLite allows
// ORDER BY and LIMIT only at the end of a compound select, hence the
// subqueries: each is the head of an index in (updated_at, id) order.
const sqliteNeedsAttentionSQL = `SELECT ` + sqliteRecordColumns + `
FROM (
    SELECT * FROM (SELECT * FROM unstuck_idem_record WHERE status = 'pending'
        ORDER BY updated_at, id LIMIT ?1)
    UNION ALL
    SELECT * FROM (SELECT * FROM unstuck_idem_record WHERE status = 'unavailable'
        ORDER BY updated_at, id LIMIT ?1)
    UNION ALL
    SELECT * FROM (SELECT * FROM unstuck_idem_record WHERE status = 'processing' AND lease_expires_at <= ?2
        ORDER BY updated_at, id LIMIT ?1)
)
ORDER BY updated_at, id
LIMIT ?1`

// sqliteStatusCountsSQL counts every status exactly, with its least
// updated_at, in one pass over the (status, updated_at, id) index.
const sqliteStatusCountsSQL = `SELECT status, count(*), min(updated_at)
FROM unstuck_idem_record
GROUP BY status`

// sqliteStuckCountSQL takes ?1 now (µs); the partial index on
// lease_expires_at serves it.
const sqliteStuckCountSQL = `SELECT count(*) FROM unstuck_idem_record
WHERE status = 'processing' AND lease_expires_at <= ?1`

func sqliteKey(ctx context.Context, db sqliteExecutor, id int64) (idemdriver.Record, bool, error) {
	now := sqliteClock()
	rec, err := sqliteScanRecord(db.QueryRowContext(ctx, sqliteKeySQL, id), now)
	if errors.Is(err, sql.ErrNoRows) {
		return idemdriver.Record{}, false, nil
	}
	if err != nil {
		return idemdriver.Record{}, false, sqliteMapError(err)
	}
	return rec, true, nil
}

func sqliteListKeys(ctx context.Context, db sqliteExecutor, q keyQuery) ([]idemdriver.Record, error) {
	now := sqliteClock()
	sql, args := sqliteListKeysSQL(q, now)
	return sqliteQueryRecords(ctx, db, now, sql, args...)
}

func sqliteNeedsAttention(ctx context.Context, db sqliteExecutor, limit int) ([]idemdriver.Record, error) {
	now := sqliteClock()
	return sqliteQueryRecords(ctx, db, now, sqliteNeedsAttentionSQL, limit, now.UnixMicro())
}

func sqliteQueryRecords(ctx context.Context, db sqliteExecutor, now time.Time, query string, args ...any) ([]idemdriver.Record, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, sqliteMapError(err)
	}
	defer rows.Close()
	var recs []idemdriver.Record
	for rows.Next() {
		rec, err := sqliteScanRecord(rows, now)
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, sqliteMapError(err)
	}
	return recs, nil
}

// sqliteKeyOverview counts exactly: an embedded database holds few enough
// records for one pass over the status index.
func sqliteKeyOverview(ctx context.Context, db sqliteExecutor) (KeyOverview, error) {
	now := sqliteClock()
	rows, err := db.QueryContext(ctx, sqliteStatusCountsSQL)
	if err != nil {
		return KeyOverview{}, sqliteMapError(err)
	}
	defer rows.Close()
	found := make(map[idemdriver.Status]StatusCount, len(idemdriver.Statuses))
	for rows.Next() {
		var (
			status string
			count  int64
			oldest int64
		)
		if err := rows.Scan(&status, &count, &oldest); err != nil {
			return KeyOverview{}, sqliteMapError(err)
		}
		found[idemdriver.Status(status)] = StatusCount{Status: idemdriver.Status(status), Count: count, Exact: true, Oldest: micros(oldest)}
	}
	if err := rows.Err(); err != nil {
		return KeyOverview{}, sqliteMapError(err)
	}
	o := KeyOverview{StuckExact: true, AsOf: now}
	for _, s := range idemdriver.Statuses {
		c, ok := found[s]
		if !ok {
			c = StatusCount{Status: s, Exact: true}
		}
		o.Counts = append(o.Counts, c)
	}
	if err := db.QueryRowContext(ctx, sqliteStuckCountSQL, now.UnixMicro()).Scan(&o.StuckProcessing); err != nil {
		return KeyOverview{}, sqliteMapError(err)
	}
	return o, nil
}

// sqliteScanRecord is idem/idemsqlite's scanRecord: one row of
// sqliteRecordColumns, stamped with readAt. It returns sql.ErrNoRows
// unwrapped, and an error, never a panic, for a row that does not decode.
func sqliteScanRecord(row scanner, readAt time.Time) (idemdriver.Record, error) {
	var (
		rec                            idemdriver.Record
		status, resourceIDs            string
		result                         sql.Null[[]byte]
		responseCode, attempts         int64
		leaseExpiresAt                 sql.NullInt64
		createdAt, updatedAt, expireAt int64
	)
	err := row.Scan(&rec.ID, &rec.Scope, &rec.Operation, &rec.KeyDigest, &rec.Fingerprint,
		&status, &result, &responseCode, &rec.CorrelationID, &rec.ExternalRef, &resourceIDs,
		&rec.LastError, &rec.Token, &rec.Fence, &leaseExpiresAt, &attempts, &rec.Version,
		&createdAt, &updatedAt, &expireAt)
	if err != nil {
		return idemdriver.Record{}, err
	}
	rec.Status = idemdriver.Status(status)
	if !rec.Status.Valid() {
		return idemdriver.Record{}, fmt.Errorf("record %d: unknown status %q", rec.ID, status)
	}
	if result.Valid {
		// database/sql copies []byte destinations out of driver memory; a
		// stored empty result stays non-nil.
		rec.Result = result.V
		if rec.Result == nil {
			rec.Result = []byte{}
		}
	}
	var ids []string
	if err := json.Unmarshal([]byte(resourceIDs), &ids); err != nil {
		return idemdriver.Record{}, fmt.Errorf("record %d: decode resource_ids: %w", rec.ID, err)
	}
	if ids == nil {
		return idemdriver.Record{}, fmt.Errorf("record %d: decode resource_ids: not an array", rec.ID)
	}
	if len(ids) > 0 {
		rec.ResourceIDs = ids // an empty list reads as nil
	}
	rec.ResponseCode = int(responseCode)
	rec.Attempts = int(attempts)
	if leaseExpiresAt.Valid {
		rec.LeaseExpiresAt = micros(leaseExpiresAt.Int64)
	}
	rec.CreatedAt = micros(createdAt)
	rec.UpdatedAt = micros(updatedAt)
	rec.ExpiresAt = micros(expireAt)
	rec.ReadAt = readAt
	return rec, nil
}

// sqliteMapError maps the extended result codes that mean something to
// callers: a unique violation (SQLITE_CONSTRAINT_UNIQUE, 2067; the only
// unique value the console writes is a username) to ErrConflict.
func sqliteMapError(err error) error {
	var serr *modernc.Error
	if errors.As(err, &serr) && serr.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE {
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	return err
}
