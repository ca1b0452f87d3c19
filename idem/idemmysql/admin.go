package idemmysql

// The admin reads (idemdriver.Admin) and the seeding path
// (idemdriver.Seeder). Every read runs on the pool, outside any
// transaction, and judges leases by the database's clock, which it returns
// as each record's ReadAt. The indexes they rely on are created by the
// "idem" migration line (001_records).

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/internal/sqlstore"
)

// keyWhere returns the WHERE clause (or "") of q's filters, with its
// cursor when withCursor is set, and their arguments. The clock is the
// database's, read by the statement.
func keyWhere(q idemdriver.KeyQuery, withCursor bool) (string, []any) {
	var (
		conds []string
		args  []any
	)
	cond := func(c string, vs ...any) {
		conds = append(conds, c)
		args = append(args, vs...)
	}
	if q.Status != "" {
		cond("r.status = ?", string(q.Status))
	}
	if q.Stuck {
		cond("r.lease_expires_at <= " + dbNow)
	}
	if q.Scope != "" {
		cond("r.scope = ?", q.Scope)
	}
	if q.Operation != "" {
		cond("r.operation = ?", q.Operation)
	}
	if p := q.SkipOperationPrefix; p != "" {
		// Byte-wise, as the column is VARBINARY.
		cond("LEFT(r.operation, ?) <> ?", len(p), p)
	}
	if d := q.KeyDigest; d != "" {
		// A digest or its prefix: a range on the short digest's index
		// (the digest's first 12 bytes); every digest byte is a hex
		// digit, all below 'g'.
		cond("r.key_digest >= ? AND r.key_digest < ?", d, d+"g")
	}
	if q.KeyHash != "" {
		cond("r.key_hash = ?", q.KeyHash)
	}
	if q.CorrelationID != "" {
		cond("r.correlation_id = ?", q.CorrelationID)
	}
	if q.ExternalRef != "" {
		cond("r.external_ref = ?", q.ExternalRef)
	}
	if !q.From.IsZero() {
		cond("r.updated_at >= ?", q.From.UnixMicro())
	}
	if !q.To.IsZero() {
		cond("r.updated_at < ?", q.To.UnixMicro())
	}
	if q.AfterSet && withCursor {
		cmp := "<"
		if q.Order.Oldest() {
			cmp = ">"
		}
		// Spelled out rather than a row comparison, so that every
		// version's range optimizer reads the index from the position.
		at := q.AfterUpdatedAt.UnixMicro()
		cond("(r.updated_at "+cmp+" ? OR (r.updated_at = ? AND r.id "+cmp+" ?))", at, at, q.AfterID)
	}
	if len(conds) == 0 {
		return "", args
	}
	return "WHERE " + strings.Join(conds, "\n  AND ") + "\n", args
}

// listKeysSQL returns the list query of q and its arguments: newest change
// first (oldest first for OrderOldest), keyset on (updated_at, id), one row
// more than the page.
func listKeysSQL(q idemdriver.KeyQuery) (string, []any) {
	where, args := keyWhere(q, true)
	dir := "DESC"
	if q.Order.Oldest() {
		dir = "ASC"
	}
	args = append(args, q.Limit+1)
	return `SELECT ` + dbNow + `, ` + recordColumns + `
FROM unstuck_idem_record AS r
` + where + `ORDER BY r.updated_at ` + dir + `, r.id ` + dir + `
LIMIT ?`, args
}

// countKeysSQL returns the query counting q's records up to upTo+1 (the
// cursor is ignored): the scan stops there.
func countKeysSQL(q idemdriver.KeyQuery, upTo int) (string, []any) {
	where, args := keyWhere(q, false)
	args = append(args, upTo+1)
	return `SELECT count(*) FROM (SELECT 1 FROM unstuck_idem_record AS r
` + where + `LIMIT ?) AS c`, args
}

// queryKeyByID takes the id; one row, NULL record columns when none.
const queryKeyByID = `SELECT ` + dbNow + `, ` + recordColumns + `
FROM (SELECT 1 AS one) AS clock
LEFT JOIN unstuck_idem_record AS r ON r.id = ?`

// queryNeedsAttention takes the limit four times: each branch is the head
// of the (status, updated_at, id) index.
const queryNeedsAttention = `SELECT * FROM (
    (SELECT ` + dbNow + ` AS read_at, ` + recordColumns + ` FROM unstuck_idem_record AS r
        WHERE r.status = 'pending' ORDER BY r.updated_at, r.id LIMIT ?)
    UNION ALL
    (SELECT ` + dbNow + ` AS read_at, ` + recordColumns + ` FROM unstuck_idem_record AS r
        WHERE r.status = 'unavailable' ORDER BY r.updated_at, r.id LIMIT ?)
    UNION ALL
    (SELECT ` + dbNow + ` AS read_at, ` + recordColumns + ` FROM unstuck_idem_record AS r
        WHERE r.status = 'processing' AND r.lease_expires_at <= ` + dbNow + ` ORDER BY r.updated_at, r.id LIMIT ?)
) AS attention
ORDER BY updated_at, id
LIMIT ?`

// queryStuckCount reads the clock and counts the processing records past
// their lease, from the (status, lease_expires_at) index.
const queryStuckCount = `SELECT ` + dbNow + `, count(*) FROM unstuck_idem_record
WHERE status = 'processing' AND lease_expires_at <= ` + dbNow

// ListKeys implements [idemdriver.Admin.ListKeys].
func (s *Store) ListKeys(ctx context.Context, f idemdriver.KeyFilter) (idemdriver.KeyPage, error) {
	q, err := f.Check()
	if err != nil {
		return idemdriver.KeyPage{}, err
	}
	query, args := listKeysSQL(q)
	recs, err := s.queryRecords(ctx, query, args...)
	if err != nil {
		return idemdriver.KeyPage{}, fmt.Errorf("idemmysql: list keys: %w", err)
	}
	return sqlstore.Page(recs, q), nil
}

// CountKeys implements [idemdriver.Admin.CountKeys].
func (s *Store) CountKeys(ctx context.Context, f idemdriver.KeyFilter, upTo int) (idemdriver.KeyCount, error) {
	return sqlstore.CountKeys(ctx, s.db, driverName, f, upTo, countKeysSQL)
}

// KeyByID implements [idemdriver.Admin.KeyByID].
func (s *Store) KeyByID(ctx context.Context, id int64) (idemdriver.Record, bool, error) {
	rec, ok, _, err := scanRecord(s.db.QueryRowContext(ctx, queryKeyByID, id))
	if err != nil {
		return idemdriver.Record{}, false, fmt.Errorf("idemmysql: key by id: %w", err)
	}
	return rec, ok, nil
}

// NeedsAttention implements [idemdriver.Admin.NeedsAttention].
func (s *Store) NeedsAttention(ctx context.Context, limit int) ([]idemdriver.Record, error) {
	n := idemdriver.ClampLimit(limit)
	recs, err := s.queryRecords(ctx, queryNeedsAttention, n, n, n, n)
	if err != nil {
		return nil, fmt.Errorf("idemmysql: needs attention: %w", err)
	}
	return recs, nil
}

// EachKey implements [idemdriver.Admin.EachKey] with ListKeys.
func (s *Store) EachKey(ctx context.Context, f idemdriver.KeyFilter, batch int, fn func([]idemdriver.Record) error) error {
	return idemdriver.EachKey(ctx, s.ListKeys, f, batch, fn)
}

func (s *Store) queryRecords(ctx context.Context, query string, args ...any) ([]idemdriver.Record, error) {
	return sqlstore.CollectRecords(ctx, s.db, scanListed, query, args...)
}

// scanListed reads a listed row: a record always, with the clock.
func scanListed(rows *sql.Rows) (idemdriver.Record, error) {
	rec, _, _, err := scanRecord(rows)
	return rec, err
}

// KeyOverview implements [idemdriver.Admin.KeyOverview]. Every count is
// exact, from one pass over the status index: on a table of many millions
// of records it takes seconds (see BENCHMARKS.md), which the console's
// overview pays on each load.
func (s *Store) KeyOverview(ctx context.Context) (idemdriver.KeyOverview, error) {
	o, err := s.keyOverview(ctx)
	if err != nil {
		return idemdriver.KeyOverview{}, fmt.Errorf("idemmysql: key overview: %w", err)
	}
	return o, nil
}

func (s *Store) keyOverview(ctx context.Context) (idemdriver.KeyOverview, error) {
	o := idemdriver.KeyOverview{StuckExact: true}
	var now int64
	if err := s.db.QueryRowContext(ctx, queryStuckCount).Scan(&now, &o.StuckProcessing); err != nil {
		return idemdriver.KeyOverview{}, err
	}
	o.AsOf = sqlstore.Micros(now)
	counts, err := sqlstore.StatusCounts(ctx, s.db)
	if err != nil {
		return idemdriver.KeyOverview{}, err
	}
	o.Counts = counts
	return o, nil
}

// querySeed inserts one record as it is.
const querySeed = sqlstore.QuerySeedColumns + ` VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULLIF(?, ''))`

// SeedRecords implements [idemdriver.Seeder]: it inserts recs in one READ
// COMMITTED transaction and raises the fence counter above the highest
// fence seeded. It bypasses the lease protocol and the engine (see
// idemdriver.Seeder): for benchmarks and imports only. A record violating
// the table's constraints (an existing ident, a processing record without
// a lease) fails the whole call.
func (s *Store) SeedRecords(ctx context.Context, recs []idemdriver.Record) error {
	if len(recs) == 0 {
		return nil
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, querySeed)
		if err != nil {
			return err
		}
		defer st.Close()
		top, err := sqlstore.Seed(ctx, st, recs)
		if err != nil {
			return err
		}
		if top > 0 {
			if _, err := tx.ExecContext(ctx, queryRaiseFence, top); err != nil {
				return fmt.Errorf("raise the fence counter: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("idemmysql: seed records: %w", err)
	}
	return nil
}
