package idemsqlite

// The admin reads (idemdriver.Admin) and the seeding path
// (idemdriver.Seeder). Every read runs on the handle, outside any
// transaction (WAL: readers never wait for the writer), and judges leases
// by the process clock, which it returns as each record's ReadAt. The
// indexes they rely on are created by the "idem" migration line
// (003_admin_indexes); the EXPLAIN tests in admin_test.go check that each
// list is answered by one of them.

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/internal/sqlstore"
)

// keyWhere returns the WHERE clause (or "") of q's filters, with its
// cursor when withCursor is set, and now as the clock that judges leases,
// appending the arguments to args. Each condition is written so that an
// index serves it: the partial indexes on correlation_id and external_ref
// are only usable when the query repeats their predicate, the digest's
// prefix index only when it says substr(key_digest, 1, 12).
func keyWhere(q idemdriver.KeyQuery, now time.Time, args *[]any, withCursor bool) string {
	arg := func(v any) string {
		*args = append(*args, v)
		return "?" + strconv.Itoa(len(*args))
	}
	var conds []string
	if q.Status != "" {
		conds = append(conds, "status = "+arg(string(q.Status)))
	}
	if q.Stuck {
		conds = append(conds, "lease_expires_at <= "+arg(now.UnixMicro()))
	}
	if q.Scope != "" {
		conds = append(conds, "scope = "+arg(q.Scope))
	}
	if q.Operation != "" {
		conds = append(conds, "operation = "+arg(q.Operation))
	}
	if p := q.SkipOperationPrefix; p != "" {
		conds = append(conds, "substr(operation, 1, "+arg(utf8.RuneCountInString(p))+") <> "+arg(p))
	}
	switch d := q.KeyDigest; {
	case d == "":
	case len(d) == 64 && q.Scope != "" && q.Operation != "":
		conds = append(conds, "key_digest = "+arg(d)) // the unique index on the three
	case len(d) == 64:
		conds = append(conds, "substr(key_digest, 1, "+strconv.Itoa(idemdriver.ShortDigestLen)+") = "+arg(d[:idemdriver.ShortDigestLen]),
			"key_digest = "+arg(d))
	default:
		conds = append(conds, "substr(key_digest, 1, "+strconv.Itoa(idemdriver.ShortDigestLen)+") = "+arg(d[:idemdriver.ShortDigestLen]),
			"substr(key_digest, 1, "+arg(len(d))+") = "+arg(d))
	}
	if q.KeyHash != "" {
		conds = append(conds, "key_hash = "+arg(q.KeyHash))
	}
	if q.CorrelationID != "" {
		conds = append(conds, "correlation_id = "+arg(q.CorrelationID)+" AND correlation_id <> ''")
	}
	if q.ExternalRef != "" {
		conds = append(conds, "external_ref = "+arg(q.ExternalRef)+" AND external_ref <> ''")
	}
	if !q.From.IsZero() {
		conds = append(conds, "updated_at >= "+arg(q.From.UnixMicro()))
	}
	if !q.To.IsZero() {
		conds = append(conds, "updated_at < "+arg(q.To.UnixMicro()))
	}
	if q.AfterSet && withCursor {
		cmp := "<"
		if q.Order.Oldest() {
			cmp = ">"
		}
		conds = append(conds, "(updated_at, id) "+cmp+" ("+arg(q.AfterUpdatedAt.UnixMicro())+", "+arg(q.AfterID)+")")
	}
	if len(conds) == 0 {
		return ""
	}
	return "WHERE " + strings.Join(conds, "\n  AND ") + "\n"
}

// listKeysSQL returns the list query of q and its arguments, with now as
// the clock that judges leases: newest change first (oldest first for
// OrderOldest), keyset on (updated_at, id), one row more than the page.
func listKeysSQL(q idemdriver.KeyQuery, now time.Time) (string, []any) {
	var args []any
	where := keyWhere(q, now, &args, true)
	dir := "DESC"
	if q.Order.Oldest() {
		dir = "ASC"
	}
	args = append(args, q.Limit+1)
	return `SELECT ` + recordColumns + `
FROM unstuck_idem_record
` + where + `ORDER BY updated_at ` + dir + `, id ` + dir + `
LIMIT ?` + strconv.Itoa(len(args)), args
}

// countKeysSQL returns the query counting q's records up to upTo+1 (the
// cursor is ignored): the scan stops there.
func countKeysSQL(q idemdriver.KeyQuery, now time.Time, upTo int) (string, []any) {
	var args []any
	where := keyWhere(q, now, &args, false)
	args = append(args, upTo+1)
	return `SELECT count(*) FROM (SELECT 1 FROM unstuck_idem_record
` + where + `LIMIT ?` + strconv.Itoa(len(args)) + `)`, args
}

// ?1 id.
const queryKeyByID = `SELECT ` + recordColumns + `
FROM unstuck_idem_record
WHERE id = ?1`

// queryNeedsAttention takes ?1 the limit, ?2 now (µs). SQLite allows ORDER
// BY and LIMIT only at the end of a compound select, hence the subqueries:
// each is the head of an index in (updated_at, id) order.
const queryNeedsAttention = `SELECT ` + recordColumns + `
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

// queryStuckCount takes ?1 now (µs); the partial index of processing
// records serves it.
const queryStuckCount = `SELECT count(*) FROM unstuck_idem_record
WHERE status = 'processing' AND lease_expires_at <= ?1`

// ListKeys implements [idemdriver.Admin.ListKeys].
func (s *Store) ListKeys(ctx context.Context, f idemdriver.KeyFilter) (idemdriver.KeyPage, error) {
	q, err := f.Check()
	if err != nil {
		return idemdriver.KeyPage{}, err
	}
	now := clock(time.Time{})
	query, args := listKeysSQL(q, now)
	recs, err := s.queryRecords(ctx, now, query, args...)
	if err != nil {
		return idemdriver.KeyPage{}, fmt.Errorf("idemsqlite: list keys: %w", err)
	}
	return sqlstore.Page(recs, q), nil
}

// CountKeys implements [idemdriver.Admin.CountKeys].
func (s *Store) CountKeys(ctx context.Context, f idemdriver.KeyFilter, upTo int) (idemdriver.KeyCount, error) {
	return sqlstore.CountKeys(ctx, s.db, driverName, f, upTo, func(q idemdriver.KeyQuery, upTo int) (string, []any) {
		return countKeysSQL(q, clock(time.Time{}), upTo)
	})
}

// KeyByID implements [idemdriver.Admin.KeyByID].
func (s *Store) KeyByID(ctx context.Context, id int64) (idemdriver.Record, bool, error) {
	rec, ok, err := found(scanRecord(s.db.QueryRowContext(ctx, queryKeyByID, id), clock(time.Time{})))
	if err != nil {
		return idemdriver.Record{}, false, fmt.Errorf("idemsqlite: key by id: %w", err)
	}
	return rec, ok, nil
}

// NeedsAttention implements [idemdriver.Admin.NeedsAttention].
func (s *Store) NeedsAttention(ctx context.Context, limit int) ([]idemdriver.Record, error) {
	now := clock(time.Time{})
	recs, err := s.queryRecords(ctx, now, queryNeedsAttention, idemdriver.ClampLimit(limit), now.UnixMicro())
	if err != nil {
		return nil, fmt.Errorf("idemsqlite: needs attention: %w", err)
	}
	return recs, nil
}

// EachKey implements [idemdriver.Admin.EachKey] with ListKeys.
func (s *Store) EachKey(ctx context.Context, f idemdriver.KeyFilter, batch int, fn func([]idemdriver.Record) error) error {
	return idemdriver.EachKey(ctx, s.ListKeys, f, batch, fn)
}

func (s *Store) queryRecords(ctx context.Context, now time.Time, query string, args ...any) ([]idemdriver.Record, error) {
	return sqlstore.CollectRecords(ctx, s.db, func(rows *sql.Rows) (idemdriver.Record, error) { return scanRecord(rows, now) }, query, args...)
}

// KeyOverview implements [idemdriver.Admin.KeyOverview]. Every count is
// exact: an embedded database holds few enough records for one pass over
// the status index.
func (s *Store) KeyOverview(ctx context.Context) (idemdriver.KeyOverview, error) {
	o, err := s.keyOverview(ctx)
	if err != nil {
		return idemdriver.KeyOverview{}, fmt.Errorf("idemsqlite: key overview: %w", err)
	}
	return o, nil
}

func (s *Store) keyOverview(ctx context.Context) (idemdriver.KeyOverview, error) {
	now := clock(time.Time{})
	counts, err := sqlstore.StatusCounts(ctx, s.db)
	if err != nil {
		return idemdriver.KeyOverview{}, err
	}
	o := idemdriver.KeyOverview{Counts: counts, StuckExact: true, AsOf: now}
	if err := s.db.QueryRowContext(ctx, queryStuckCount, now.UnixMicro()).Scan(&o.StuckProcessing); err != nil {
		return idemdriver.KeyOverview{}, err
	}
	return o, nil
}

// querySeed inserts one record as it is; the fence trigger of migration 002
// keeps the fence counter at or above every fence inserted.
const querySeed = sqlstore.QuerySeedColumns + ` VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, nullif(?20, ''))`

// SeedRecords implements [idemdriver.Seeder]: it inserts recs in one write
// transaction, holding the store's writer like every write; the fence
// counter follows the highest fence by the trigger of migration 002. It
// bypasses the lease protocol and the engine (see idemdriver.Seeder): for
// benchmarks and imports only. A record violating the table's constraints
// (an existing ident, a processing record without a lease) fails the
// whole call.
func (s *Store) SeedRecords(ctx context.Context, recs []idemdriver.Record) error {
	if len(recs) == 0 {
		return nil
	}
	err := s.immediate(ctx, func(conn *sql.Conn) error {
		st, err := conn.PrepareContext(ctx, querySeed)
		if err != nil {
			return err
		}
		defer st.Close()
		_, err = sqlstore.Seed(ctx, st, recs)
		return err
	})
	if err != nil {
		return fmt.Errorf("idemsqlite: seed records: %w", err)
	}
	return nil
}
