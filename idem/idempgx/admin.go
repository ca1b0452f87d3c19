package idempgx

// The admin reads (idemdriver.Admin) and the seeding path
// (idemdriver.Seeder). Every read runs on the pool, outside any
// transaction, and judges leases by statement_timestamp(), which it returns
// as each record's ReadAt. The indexes they rely on are created by the
// "idem" migration line (002_admin_indexes); the EXPLAIN tests in
// admin_test.go check that each list is answered by one of them.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// Default caps of KeyOverview.
const (
	// DefaultCountCap is how many records of one status KeyOverview counts
	// exactly before it turns to the planner's statistics.
	DefaultCountCap = 1000
	// DefaultStuckCap is how many stuck records (processing past the
	// lease) KeyOverview counts exactly, from the partial index of
	// processing records (an index-only scan that reads at most this many
	// entries: about 2.5 ms at 10,000, 17 ms at 100,000 on the development
	// machine). Above it the count is a lower bound. There are no
	// statistics to estimate it from: stuck records are processing ones
	// whose lease ended, a condition on time.
	DefaultStuckCap = 10_000
)

type overviewCaps struct{ count, stuck int }

// SetOverviewCaps sets the caps of [Store.KeyOverview]: count for each
// status, stuck for the stuck count; a value <= 0 restores its default
// ([DefaultCountCap], [DefaultStuckCap]). Tests lower them to reach the
// estimate and lower-bound paths. It is safe to call concurrently with
// reads.
func (s *Store) SetOverviewCaps(count, stuck int) {
	if count <= 0 {
		count = DefaultCountCap
	}
	if stuck <= 0 {
		stuck = DefaultStuckCap
	}
	s.caps.Store(&overviewCaps{count: count, stuck: stuck})
}

func (s *Store) overviewCaps() overviewCaps {
	if c := s.caps.Load(); c != nil {
		return *c
	}
	return overviewCaps{count: DefaultCountCap, stuck: DefaultStuckCap}
}

// keyWhere returns the WHERE clause (or "") of q's filters, with its
// cursor when withCursor is set, appending the arguments to args. Each condition is written so
// that an index serves it: the partial indexes on correlation_id and
// external_ref are only usable when the query repeats their predicate, the
// digest's prefix index only when the query says left(key_digest, 12).
func keyWhere(q idemdriver.KeyQuery, args *[]any, withCursor bool) string {
	arg := func(v any) string {
		*args = append(*args, v)
		return "$" + strconv.Itoa(len(*args))
	}
	var conds []string
	if q.Status != "" {
		conds = append(conds, "status = "+arg(string(q.Status)))
	}
	if q.Stuck {
		conds = append(conds, "lease_expires_at <= statement_timestamp()")
	}
	if q.Scope != "" {
		conds = append(conds, "scope = "+arg(q.Scope))
	}
	if q.Operation != "" {
		conds = append(conds, "operation = "+arg(q.Operation))
	}
	if q.SkipOperationPrefix != "" {
		conds = append(conds, "NOT starts_with(operation, "+arg(q.SkipOperationPrefix)+")")
	}
	switch d := q.KeyDigest; {
	case d == "":
	case len(d) == 64 && q.Scope != "" && q.Operation != "":
		conds = append(conds, "key_digest = "+arg(d)) // the unique index on the three
	case len(d) == 64:
		conds = append(conds, "left(key_digest, "+strconv.Itoa(idemdriver.ShortDigestLen)+") = "+arg(d[:idemdriver.ShortDigestLen]),
			"key_digest = "+arg(d))
	default:
		conds = append(conds, "left(key_digest, "+strconv.Itoa(idemdriver.ShortDigestLen)+") = "+arg(d[:idemdriver.ShortDigestLen]),
			"starts_with(key_digest, "+arg(d)+")")
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
		conds = append(conds, "updated_at >= "+arg(q.From))
	}
	if !q.To.IsZero() {
		conds = append(conds, "updated_at < "+arg(q.To))
	}
	if q.AfterSet && withCursor {
		cmp := "<"
		if q.Order.Oldest() {
			cmp = ">"
		}
		conds = append(conds, "(updated_at, id) "+cmp+" ("+arg(q.AfterUpdatedAt)+", "+arg(q.AfterID)+")")
	}
	if len(conds) == 0 {
		return ""
	}
	return "WHERE " + strings.Join(conds, "\n  AND ") + "\n"
}

// listKeysSQL returns the list query of q and its arguments: newest change
// first (oldest first for OrderOldest), keyset on (updated_at, id), one
// row more than the page. Each filter has an index that returns rows in
// this order, so the query stops after the page (see the EXPLAIN tests).
func listKeysSQL(q idemdriver.KeyQuery) (string, []any) {
	var args []any
	where := keyWhere(q, &args, true)
	dir := "DESC"
	if q.Order.Oldest() {
		dir = "ASC"
	}
	args = append(args, q.Limit+1)
	return `SELECT ` + recordColumns + `, statement_timestamp()
FROM unstuck_idem_record
` + where + `ORDER BY updated_at ` + dir + `, id ` + dir + `
LIMIT $` + strconv.Itoa(len(args)), args
}

// countKeysSQL returns the query counting q's records up to upTo+1 (the
// cursor is ignored): the scan stops there.
func countKeysSQL(q idemdriver.KeyQuery, upTo int) (string, []any) {
	var args []any
	where := keyWhere(q, &args, false)
	args = append(args, upTo+1)
	return `SELECT count(*) FROM (SELECT 1 FROM unstuck_idem_record
` + where + `LIMIT $` + strconv.Itoa(len(args)) + `) c`, args
}

// $1 id.
const keyByIDSQL = `SELECT ` + recordColumns + `, statement_timestamp()
FROM unstuck_idem_record
WHERE id = $1`

// needsAttentionSQL takes $1 the limit. Each branch is the head of an
// index in (updated_at, id) order; the union is sorted again, at most three
// times the limit rows.
const needsAttentionSQL = `SELECT ` + recordColumns + `, statement_timestamp()
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

// statusCountsSQL counts, for each status of $1 in that order, its records
// up to $2 (an index-only scan of the (status, updated_at, id) index that
// stops there) and its least updated_at (the head of the same index); with
// the processing records past their lease, counted up to $3 from the
// partial index of processing records (which includes lease_expires_at; an
// InitPlan, run once), and the clock, in every row.
const statusCountsSQL = `SELECT s.status,
    (SELECT count(*) FROM (SELECT 1 FROM unstuck_idem_record r WHERE r.status = s.status LIMIT $2) c),
    (SELECT min(r.updated_at) FROM unstuck_idem_record r WHERE r.status = s.status),
    (SELECT count(*) FROM (SELECT 1 FROM unstuck_idem_record r
        WHERE r.status = 'processing' AND r.lease_expires_at <= statement_timestamp() LIMIT $3) c),
    statement_timestamp()
FROM unnest($1::text[]) WITH ORDINALITY AS s(status, n)
ORDER BY s.n`

// statusStatsSQL reads what the estimates come from: the table's row
// estimate, when ANALYZE last ran on it, and the most common values of
// status with their frequencies. The table is the one the search_path
// resolves. Every column but reltuples may be NULL (never analyzed);
// reltuples is -1 then.
const statusStatsSQL = `SELECT c.reltuples::float8,
    greatest(st.last_analyze, st.last_autoanalyze),
    s.most_common_vals::text::text[],
    s.most_common_freqs::float8[]
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stat_user_tables st ON st.relid = c.oid
LEFT JOIN pg_stats s ON s.schemaname = n.nspname AND s.tablename = c.relname
    AND s.attname = 'status' AND NOT s.inherited
WHERE c.oid = 'unstuck_idem_record'::regclass`

// ListKeys implements [idemdriver.Admin.ListKeys].
func (s *Store) ListKeys(ctx context.Context, f idemdriver.KeyFilter) (idemdriver.KeyPage, error) {
	q, err := f.Check()
	if err != nil {
		return idemdriver.KeyPage{}, err
	}
	sql, args := listKeysSQL(q)
	recs, err := s.queryRecords(ctx, "list keys", sql, args...)
	if err != nil {
		return idemdriver.KeyPage{}, err
	}
	// One more row than the page was read to learn whether another follows.
	page := idemdriver.KeyPage{Records: recs}
	if len(recs) > q.Limit {
		page.Records = recs[:q.Limit]
		page.Next = idemdriver.EncodeCursor(page.Records[q.Limit-1], q.Order)
	}
	return page, nil
}

// sqlstateQueryCanceled is PostgreSQL's error of a statement ended by its
// statement_timeout (or a cancel request).
const sqlstateQueryCanceled = "57014"

// CountKeys implements [idemdriver.Admin.CountKeys]. Under a context with a
// deadline the count runs in a transaction whose statement_timeout ends at
// that deadline, so that PostgreSQL stops it there (a context alone would
// make pgx close the connection and leave the statement running on the
// server); the client waits a second longer, for the server's end to come
// first and the connection to stay open.
func (s *Store) CountKeys(ctx context.Context, f idemdriver.KeyFilter, upTo int) (idemdriver.KeyCount, error) {
	f.After = "" // ignored, as the contract says; not checked either
	q, err := f.Check()
	if err != nil {
		return idemdriver.KeyCount{}, err
	}
	upTo = idemdriver.ClampCountUpTo(upTo)
	sql, args := countKeysSQL(q, upTo)
	args = append([]any{pgx.QueryExecModeCacheDescribe}, args...)
	var n int64
	deadline, bounded := ctx.Deadline()
	if !bounded {
		if err := s.pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			return idemdriver.KeyCount{}, mapError("count keys", err)
		}
		return idemdriver.CappedCount(n, upTo), nil
	}
	left := time.Until(deadline).Milliseconds()
	if left < 1 {
		return idemdriver.KeyCount{}, fmt.Errorf("idempgx: count keys: %w", context.DeadlineExceeded)
	}
	qctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline.Add(time.Second))
	defer cancel()
	err = pgx.BeginFunc(qctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(qctx, `SELECT set_config('statement_timeout', $1, true)`, strconv.FormatInt(left, 10)); err != nil {
			return err
		}
		return tx.QueryRow(qctx, sql, args...).Scan(&n)
	})
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == sqlstateQueryCanceled {
		return idemdriver.KeyCount{}, fmt.Errorf("idempgx: count keys: %w: %w", context.DeadlineExceeded, err)
	}
	if err != nil {
		return idemdriver.KeyCount{}, mapError("count keys", err)
	}
	return idemdriver.CappedCount(n, upTo), nil
}

// KeyByID implements [idemdriver.Admin.KeyByID].
func (s *Store) KeyByID(ctx context.Context, id int64) (idemdriver.Record, bool, error) {
	rec, err := scanRecord(s.pool.QueryRow(ctx, keyByIDSQL, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return idemdriver.Record{}, false, nil
	}
	if err != nil {
		return idemdriver.Record{}, false, mapError("key by id", err)
	}
	return rec, true, nil
}

// NeedsAttention implements [idemdriver.Admin.NeedsAttention].
func (s *Store) NeedsAttention(ctx context.Context, limit int) ([]idemdriver.Record, error) {
	return s.queryRecords(ctx, "needs attention", needsAttentionSQL, idemdriver.ClampLimit(limit))
}

// EachKey implements [idemdriver.Admin.EachKey] with ListKeys.
func (s *Store) EachKey(ctx context.Context, f idemdriver.KeyFilter, batch int, fn func([]idemdriver.Record) error) error {
	return idemdriver.EachKey(ctx, s.ListKeys, f, batch, fn)
}

// queryRecords runs a list query. It is planned for its own arguments
// every time (an unnamed statement; pgx caches only its description, so
// the values come back in binary, cheaper to decode than text): a cached generic
// plan does not know that one tenant holds a million records and another a
// hundred, and picked a plan 100 times slower for the large one at 10 M
// records (BENCHMARKS.md).
func (s *Store) queryRecords(ctx context.Context, op, sql string, args ...any) ([]idemdriver.Record, error) {
	rows, err := s.pool.Query(ctx, sql, append([]any{pgx.QueryExecModeCacheDescribe}, args...)...)
	if err != nil {
		return nil, mapError(op, err)
	}
	recs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (idemdriver.Record, error) { return scanRecord(row) })
	if err != nil {
		return nil, mapError(op, err)
	}
	return recs, nil
}

// KeyOverview implements [idemdriver.Admin.KeyOverview] without ever
// counting the whole table: each status is counted exactly up to a cap
// (DefaultCountCap, see SetOverviewCaps) by an index-only scan; a status
// with more records gets an estimate, the table's row estimate (reltuples)
// times the status's frequency in pg_stats, with Exact false and AsOf the
// last ANALYZE (without statistics the capped count stays, a lower bound).
// Oldest per status is one index probe; the stuck count reads the partial
// index of processing records, up to DefaultStuckCap entries.
func (s *Store) KeyOverview(ctx context.Context) (idemdriver.KeyOverview, error) {
	caps := s.overviewCaps()
	statuses := make([]string, len(idemdriver.Statuses))
	for i, st := range idemdriver.Statuses {
		statuses[i] = string(st)
	}
	rows, err := s.pool.Query(ctx, statusCountsSQL, statuses, caps.count+1, caps.stuck+1)
	if err != nil {
		return idemdriver.KeyOverview{}, mapError("key overview", err)
	}
	var (
		o      idemdriver.KeyOverview
		stuck  int64
		now    time.Time
		capped bool
	)
	for rows.Next() {
		var (
			c      idemdriver.StatusCount
			status string
			oldest *time.Time
		)
		if err := rows.Scan(&status, &c.Count, &oldest, &stuck, &now); err != nil {
			rows.Close()
			return idemdriver.KeyOverview{}, mapError("key overview", err)
		}
		c.Status = idemdriver.Status(status)
		c.Exact = c.Count <= int64(caps.count)
		capped = capped || !c.Exact
		if oldest != nil {
			c.Oldest = oldest.UTC()
		}
		o.Counts = append(o.Counts, c)
	}
	if err := rows.Err(); err != nil {
		return idemdriver.KeyOverview{}, mapError("key overview", err)
	}
	o.StuckProcessing = min(stuck, int64(caps.stuck))
	o.StuckExact = stuck <= int64(caps.stuck)
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
	if err := s.pool.QueryRow(ctx, statusStatsSQL).Scan(&reltuples, &analyzed, &vals, &freqs); err != nil {
		return idemdriver.KeyOverview{}, mapError("key overview statistics", err)
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

// Analyze refreshes the planner's statistics of the store's table (VACUUM
// (ANALYZE)), from which KeyOverview estimates large counts and which the
// lists' plans depend on. Autovacuum does it in service; call it after a
// bulk load ([Store.SeedRecords]). It cannot run inside a transaction.
func (s *Store) Analyze(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, `VACUUM (ANALYZE) unstuck_idem_record`); err != nil {
		return mapError("analyze", err)
	}
	return nil
}

// nullText is s, or NULL when s is "".
func nullText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// seedColumns are the columns SeedRecords copies, in seedRow's order.
var seedColumns = []string{"scope", "operation", "key_digest", "fingerprint", "status", "result", "response_code",
	"correlation_id", "external_ref", "resource_ids", "last_error", "owner_token", "fence", "lease_expires_at",
	"attempts", "version", "created_at", "updated_at", "expires_at", "key_hash"}

// seedLockID serialises the fence sequence's catch-up of concurrent
// SeedRecords calls ("unstuck" then 's').
const seedLockID int64 = 0x756e737475636b73

// SeedRecords implements [idemdriver.Seeder]: it copies recs into the table
// with COPY in one transaction, then raises unstuck_idem_fence_seq above
// the highest fence seeded. It bypasses the lease protocol and the engine
// (see idemdriver.Seeder): for benchmarks and imports only. A record
// violating the table's constraints (an existing ident, a processing
// record without a lease) fails the whole call.
func (s *Store) SeedRecords(ctx context.Context, recs []idemdriver.Record) error {
	if len(recs) == 0 {
		return nil
	}
	var maxFence int64
	for _, r := range recs {
		maxFence = max(maxFence, r.Fence)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		i := 0
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"unstuck_idem_record"}, seedColumns, pgx.CopyFromFunc(func() ([]any, error) {
			if i >= len(recs) {
				return nil, nil
			}
			r := recs[i]
			i++
			var lease *time.Time
			if !r.LeaseExpiresAt.IsZero() {
				lease = &r.LeaseExpiresAt
			}
			ids := r.ResourceIDs
			if ids == nil {
				ids = []string{}
			}
			return []any{r.Scope, r.Operation, r.KeyDigest, r.Fingerprint, string(r.Status), r.Result, int32(r.ResponseCode),
				r.CorrelationID, r.ExternalRef, ids, r.LastError, r.Token, r.Fence, lease,
				int32(r.Attempts), r.Version, r.CreatedAt, r.UpdatedAt, r.ExpiresAt, nullText(r.KeyHash)}, nil
		}))
		if err != nil {
			return fmt.Errorf("copy: %w", err)
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, seedLockID); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		_, err = tx.Exec(ctx, `SELECT setval('unstuck_idem_fence_seq', $1)
WHERE $1 > (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM unstuck_idem_fence_seq)`, maxFence)
		return err
	})
	if err != nil {
		return mapError("seed records", err)
	}
	return nil
}

// TableSize is the disk space of the store's table, in bytes.
type TableSize struct {
	// Table is the heap with its TOAST and maps (pg_table_size), Indexes
	// every index on it (pg_indexes_size).
	Table, Indexes int64
}

// TableSize reports the disk space of the record table and its indexes,
// for capacity planning and benchmark reports.
func (s *Store) TableSize(ctx context.Context) (TableSize, error) {
	var ts TableSize
	err := s.pool.QueryRow(ctx, `SELECT pg_table_size('unstuck_idem_record'), pg_indexes_size('unstuck_idem_record')`).
		Scan(&ts.Table, &ts.Indexes)
	if err != nil {
		return TableSize{}, mapError("table size", err)
	}
	return ts, nil
}
