package store

// The PostgreSQL half of the store: its SQL and the functions that run it.
// Every function takes a pgExecutor, the pool or a transaction, and none
// begins or ends a transaction. Names are unqualified: they resolve in the
// pool's search_path, where the pgxv5 driver's tables live. The clock is
// statement_timestamp(), the database's, as in the driver; it is returned
// with every record as read_at.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// pgExecutor is what the statements run on: *pgxpool.Pool, *pgx.Conn and
// pgx.Tx satisfy it.
type pgExecutor interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// pgIdemTableExistsSQL tells whether the driver's migration has run in the
// search_path.
const pgIdemTableExistsSQL = `SELECT to_regclass('unstuck_idem_record') IS NOT NULL`

// ---- sessions

// pgDeleteExpiredSessionsSQL is pgxstore's own cleanup statement.
const pgDeleteExpiredSessionsSQL = `DELETE FROM sessions WHERE expiry < current_timestamp`

func pgDeleteExpiredSessions(ctx context.Context, db pgExecutor) (int64, error) {
	tag, err := db.Exec(ctx, pgDeleteExpiredSessionsSQL)
	if err != nil {
		return 0, pgMapError(err)
	}
	return tag.RowsAffected(), nil
}

// ---- users

const pgUserColumns = `id, username, role, password_hash, disabled, created_at, updated_at,
    source, coalesce(subject, ''), email, display_name`

// $1 username, $2 role, $3 password_hash.
const pgCreateUserSQL = `INSERT INTO unstuck_console_user (username, role, password_hash, created_at, updated_at)
VALUES ($1, $2, $3, statement_timestamp(), statement_timestamp())
RETURNING ` + pgUserColumns

const (
	pgUserByUsernameSQL = `SELECT ` + pgUserColumns + ` FROM unstuck_console_user WHERE username = $1`
	pgUserByIDSQL       = `SELECT ` + pgUserColumns + ` FROM unstuck_console_user WHERE id = $1`
	pgListUsersSQL      = `SELECT ` + pgUserColumns + ` FROM unstuck_console_user ORDER BY username`
)

// The updates of one column of a user: $1 username, $2 the new value.
const (
	pgSetUserDisabledSQL = `UPDATE unstuck_console_user SET disabled = $2, updated_at = statement_timestamp()
WHERE username = $1`
	pgSetUserPasswordSQL = `UPDATE unstuck_console_user SET password_hash = $2, updated_at = statement_timestamp()
WHERE username = $1`
	pgSetUserRoleSQL = `UPDATE unstuck_console_user SET role = $2, updated_at = statement_timestamp()
WHERE username = $1`
	pgTouchUserSQL = `UPDATE unstuck_console_user SET updated_at = statement_timestamp() WHERE username = $1`
)

func pgCreateUser(ctx context.Context, db pgExecutor, username, role, hash string) (User, error) {
	u, err := pgScanUser(db.QueryRow(ctx, pgCreateUserSQL, username, role, hash))
	if err != nil {
		return User{}, pgMapError(err)
	}
	return u, nil
}

// pgUserBy reads the user whose column ("username" or "id") is value.
func pgUserBy(ctx context.Context, db pgExecutor, column string, value any) (User, bool, error) {
	q := pgUserByIDSQL
	if column == "username" {
		q = pgUserByUsernameSQL
	}
	u, err := pgScanUser(db.QueryRow(ctx, q, value))
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, false, nil
	}
	if err != nil {
		return User{}, false, pgMapError(err)
	}
	return u, true, nil
}

// pgUpdateUser sets column of the user named username and reports whether
// there was one.
func pgUpdateUser(ctx context.Context, db pgExecutor, username, column string, value any) (bool, error) {
	var q string
	switch column {
	case "disabled":
		q = pgSetUserDisabledSQL
	case "password_hash":
		q = pgSetUserPasswordSQL
	case "role":
		q = pgSetUserRoleSQL
	case "updated_at":
		tag, err := db.Exec(ctx, pgTouchUserSQL, username)
		if err != nil {
			return false, pgMapError(err)
		}
		return tag.RowsAffected() > 0, nil
	default:
		return false, fmt.Errorf("no update of column %q", column)
	}
	tag, err := db.Exec(ctx, q, username, value)
	if err != nil {
		return false, pgMapError(err)
	}
	return tag.RowsAffected() > 0, nil
}

func pgListUsers(ctx context.Context, db pgExecutor) ([]User, error) {
	rows, err := db.Query(ctx, pgListUsersSQL)
	if err != nil {
		return nil, pgMapError(err)
	}
	us, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (User, error) { return pgScanUser(row) })
	if err != nil {
		return nil, pgMapError(err)
	}
	return us, nil
}

func pgScanUser(row pgx.Row) (User, error) {
	var u User
	if err := row.Scan(&u.ID, &u.Username, &u.Role, &u.PasswordHash, &u.Disabled, &u.CreatedAt, &u.UpdatedAt,
		&u.Source, &u.Subject, &u.Email, &u.DisplayName); err != nil {
		return User{}, err
	}
	u.CreatedAt = u.CreatedAt.UTC()
	u.UpdatedAt = u.UpdatedAt.UTC()
	return u, nil
}

// ---- keys: the read model of unstuck_idem_record, which it never writes

// pgRecordColumns are idem/idempgx's recordColumns, in pgScanRecord's
// order; every query appends the clock as read_at.
const pgRecordColumns = `id, scope, operation, key_digest, fingerprint, status, result, response_code,
    correlation_id, external_ref, resource_ids, last_error, owner_token, fence, lease_expires_at,
    attempts, version, created_at, updated_at, expires_at`

// $1 id.
const pgKeySQL = `SELECT ` + pgRecordColumns + `, statement_timestamp()
FROM unstuck_idem_record
WHERE id = $1`

// pgListKeysSQL returns the list query of q and its arguments: newest
// change first, keyset on (updated_at, id), one row more than the page.
// Each filter has an index that returns rows in this order, so the query
// stops after the page (see the EXPLAIN tests).
func pgListKeysSQL(q keyQuery) (string, []any) {
	w := where{
		placeholder: dollar,
		timeArg:     func(t time.Time) any { return t },
		now:         func(*where) string { return "statement_timestamp()" },
	}
	w.keys(q)
	sql := `SELECT ` + pgRecordColumns + `, statement_timestamp()
FROM unstuck_idem_record
` + w.sql() + `
ORDER BY updated_at DESC, id DESC
LIMIT ` + w.arg(q.Limit+1)
	return sql, w.args
}

// pgNeedsAttentionSQL takes $1 the limit. Each branch is the head of an
// index in (updated_at, id) order; the union is sorted again, at most three
// times the limit rows.
const pgNeedsAttentionSQL = `SELECT ` + pgRecordColumns + `, statement_timestamp()
FROM (
    (SELECT * FROM unstuck_idem_record WHERE status = 'pending'
     ORDER BY updated_at, id LIMIT $1)
    UNION ALL
    (SELECT * FROM unstuck_idem_record WHERE status = 'unavailable'
     ORDER BY updated_at, id LIMIT $1)
    UNION ALL
    (SELECT * FROM unstuck_idem_record WHERE status = 'processing' AND lease_expires_at <= statement_timestamp()
     ORDER BY updated_at, id LIMIT $1)
) r
ORDER BY updated_at, id
LIMIT $1`

// pgStatusCountsSQL counts, for each status of $1 in that order, its
// records up to $2 (an index-only scan of the (status, updated_at, id)
// index that stops there) and its least updated_at (the head of the same
// index); with the processing records past their lease, counted up to $3
// from the partial index of processing records (which includes
// lease_expires_at; an InitPlan, run once), and the clock, in every row.
const pgStatusCountsSQL = `SELECT s.status,
    (SELECT count(*) FROM (SELECT 1 FROM unstuck_idem_record r WHERE r.status = s.status LIMIT $2) c),
    (SELECT min(r.updated_at) FROM unstuck_idem_record r WHERE r.status = s.status),
    (SELECT count(*) FROM (SELECT 1 FROM unstuck_idem_record r
        WHERE r.status = 'processing' AND r.lease_expires_at <= statement_timestamp() LIMIT $3) c),
    statement_timestamp()
FROM unnest($1::text[]) WITH ORDINALITY AS s(status, n)
ORDER BY s.n`

// pgStatusStatsSQL reads what the estimates come from: the table's row
// estimate, when ANALYZE last ran on it, and the most common values of
// status with their frequencies. The table is the one the search_path
// resolves. Every column but reltuples may be NULL (never analyzed);
// reltuples is -1 then.
const pgStatusStatsSQL = `SELECT c.reltuples::float8,
    greatest(st.last_analyze, st.last_autoanalyze),
    s.most_common_vals::text::text[],
    s.most_common_freqs::float8[]
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stat_user_tables st ON st.relid = c.oid
LEFT JOIN pg_stats s ON s.schemaname = n.nspname AND s.tablename = c.relname
    AND s.attname = 'status' AND NOT s.inherited
WHERE c.oid = 'unstuck_idem_record'::regclass`

func pgKey(ctx context.Context, db pgExecutor, id int64) (idemdriver.Record, bool, error) {
	rec, err := pgScanRecord(db.QueryRow(ctx, pgKeySQL, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return idemdriver.Record{}, false, nil
	}
	if err != nil {
		return idemdriver.Record{}, false, pgMapError(err)
	}
	return rec, true, nil
}

func pgListKeys(ctx context.Context, db pgExecutor, q keyQuery) ([]idemdriver.Record, error) {
	sql, args := pgListKeysSQL(q)
	return pgQueryRecords(ctx, db, sql, args...)
}

func pgNeedsAttention(ctx context.Context, db pgExecutor, limit int) ([]idemdriver.Record, error) {
	return pgQueryRecords(ctx, db, pgNeedsAttentionSQL, limit)
}

// pgQueryRecords runs a list query. It is planned for its own arguments
// every time (QueryExecModeExec, an unnamed statement): a cached generic
// plan does not know that one tenant holds a million records and another a
// hundred, and picked a plan 100 times slower for the large one at 10 M
// records (BENCHMARKS.md).
func pgQueryRecords(ctx context.Context, db pgExecutor, sql string, args ...any) ([]idemdriver.Record, error) {
	rows, err := db.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
	if err != nil {
		return nil, pgMapError(err)
	}
	recs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (idemdriver.Record, error) { return pgScanRecord(row) })
	if err != nil {
		return nil, pgMapError(err)
	}
	return recs, nil
}

func pgKeyOverview(ctx context.Context, db pgExecutor, countCap, stuckCap int) (KeyOverview, error) {
	statuses := make([]string, len(idemdriver.Statuses))
	for i, s := range idemdriver.Statuses {
		statuses[i] = string(s)
	}
	rows, err := db.Query(ctx, pgStatusCountsSQL, statuses, countCap+1, stuckCap+1)
	if err != nil {
		return KeyOverview{}, pgMapError(err)
	}
	var (
		o      KeyOverview
		stuck  int64
		now    time.Time
		capped bool
	)
	for rows.Next() {
		var (
			c      StatusCount
			status string
			oldest *time.Time
		)
		if err := rows.Scan(&status, &c.Count, &oldest, &stuck, &now); err != nil {
			rows.Close()
			return KeyOverview{}, pgMapError(err)
		}
		c.Status = idemdriver.Status(status)
		c.Exact = c.Count <= int64(countCap)
		capped = capped || !c.Exact
		if oldest != nil {
			c.Oldest = oldest.UTC()
		}
		o.Counts = append(o.Counts, c)
	}
	if err := rows.Err(); err != nil {
		return KeyOverview{}, pgMapError(err)
	}
	o.StuckProcessing = min(stuck, int64(stuckCap))
	o.StuckExact = stuck <= int64(stuckCap)
	o.AsOf = now.UTC()
	if !capped {
		return o, nil
	}
	// Some status has more records than the cap: estimate it from the
	// statistics of the last ANALYZE.
	var (
		reltuples float64
		analyzed  *time.Time
		vals      []string
		freqs     []float64
	)
	if err := db.QueryRow(ctx, pgStatusStatsSQL).Scan(&reltuples, &analyzed, &vals, &freqs); err != nil {
		return KeyOverview{}, pgMapError(err)
	}
	estimated := false
	for i, c := range o.Counts {
		if c.Exact {
			continue
		}
		k := slices.Index(vals, string(c.Status))
		if reltuples < 0 || k < 0 || k >= len(freqs) {
			continue // no statistics: keep the capped count, a lower bound
		}
		est := int64(math.Round(reltuples * freqs[k]))
		// The exact count proved at least this many.
		o.Counts[i].Count = max(est, c.Count)
		estimated = true
	}
	if estimated && analyzed != nil {
		o.AsOf = analyzed.UTC()
	}
	return o, nil
}

// pgScanRecord is idem/idempgx's scanRecord: one row of pgRecordColumns
// followed by read_at. A row that cannot be a record is an error, never a
// panic. Times are UTC.
func pgScanRecord(row pgx.Row) (idemdriver.Record, error) {
	var (
		r      idemdriver.Record
		status string
		lease  *time.Time
	)
	err := row.Scan(&r.ID, &r.Scope, &r.Operation, &r.KeyDigest, &r.Fingerprint, &status, &r.Result,
		&r.ResponseCode, &r.CorrelationID, &r.ExternalRef, &r.ResourceIDs, &r.LastError,
		&r.Token, &r.Fence, &lease, &r.Attempts, &r.Version,
		&r.CreatedAt, &r.UpdatedAt, &r.ExpiresAt, &r.ReadAt)
	if err != nil {
		return idemdriver.Record{}, err
	}
	r.Status = idemdriver.Status(status)
	if !r.Status.Valid() {
		return idemdriver.Record{}, fmt.Errorf("record %d has unknown status %q", r.ID, status)
	}
	if lease != nil {
		r.LeaseExpiresAt = lease.UTC()
	}
	if len(r.ResourceIDs) == 0 {
		r.ResourceIDs = nil
	}
	r.CreatedAt = r.CreatedAt.UTC()
	r.UpdatedAt = r.UpdatedAt.UTC()
	r.ExpiresAt = r.ExpiresAt.UTC()
	r.ReadAt = r.ReadAt.UTC()
	return r, nil
}

// pgMapError maps the SQLSTATEs that mean something to callers: a unique
// violation on the username to ErrConflict, a username the database refuses
// to a *FieldError, a missing table to a hint about Migrate.
func pgMapError(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case "23505": // unique_violation
		if pgErr.ConstraintName == "unstuck_console_user_username_key" || pgErr.ConstraintName == "unstuck_console_user_subject_key" {
			return fmt.Errorf("%w: %w", ErrConflict, err)
		}
	case "23514": // check_violation
		if pgErr.ConstraintName == "unstuck_console_user_username_check" {
			return &FieldError{Field: "username", Reason: "refused by the database: " + pgErr.Message}
		}
	case "42P01", "3F000": // undefined_table, invalid_schema_name
		return fmt.Errorf("%w (have the driver's Migrate and the console's Migrate run in the pool's search_path?)", err)
	}
	return err
}
