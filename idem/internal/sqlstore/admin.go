package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// CollectRecords runs query on ex and decodes every row with scan.
func CollectRecords(ctx context.Context, ex Executor, scan func(*sql.Rows) (idemdriver.Record, error), query string, args ...any) ([]idemdriver.Record, error) {
	rows, err := ex.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var recs []idemdriver.Record
	for rows.Next() {
		rec, err := scan(rows)
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	return recs, rows.Err()
}

// Page makes q's page of a list that read one row more than the page, to
// learn whether another follows.
func Page(recs []idemdriver.Record, q idemdriver.KeyQuery) idemdriver.KeyPage {
	page := idemdriver.KeyPage{Records: recs}
	if len(recs) > q.Limit {
		page.Records = recs[:q.Limit]
		page.Next = idemdriver.EncodeCursor(page.Records[q.Limit-1], q.Order)
	}
	return page
}

// queryStatusCounts counts every status exactly, with its least
// updated_at, in one pass over the (status, updated_at, id) index.
const queryStatusCounts = `SELECT status, count(*), min(updated_at)
FROM unstuck_idem_record
GROUP BY status`

// StatusCounts counts the records of every status exactly, in the order
// of idemdriver.Statuses, a status without records included with zero.
func StatusCounts(ctx context.Context, ex Executor) ([]idemdriver.StatusCount, error) {
	rows, err := ex.QueryContext(ctx, queryStatusCounts)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	counts := make(map[idemdriver.Status]idemdriver.StatusCount, len(idemdriver.Statuses))
	for rows.Next() {
		var (
			status        string
			count, oldest int64
		)
		if err := rows.Scan(&status, &count, &oldest); err != nil {
			return nil, err
		}
		st := idemdriver.Status(status)
		counts[st] = idemdriver.StatusCount{Status: st, Count: count, Exact: true, Oldest: Micros(oldest)}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]idemdriver.StatusCount, 0, len(idemdriver.Statuses))
	for _, st := range idemdriver.Statuses {
		c, ok := counts[st]
		if !ok {
			c = idemdriver.StatusCount{Status: st, Exact: true}
		}
		out = append(out, c)
	}
	return out, nil
}

// QuerySeedColumns are the columns of a seeded record, in the order of
// [Seed]'s arguments; a dialect's seed statement inserts them with 20
// placeholders, key_hash as NULLIF(?, ”).
const QuerySeedColumns = `INSERT INTO unstuck_idem_record (
    scope, operation, key_digest, fingerprint, status, result, response_code,
    correlation_id, external_ref, resource_ids, last_error, owner_token, fence, lease_expires_at,
    attempts, version, created_at, updated_at, expires_at, key_hash
)`

// Seed inserts recs as they are with st, a statement of
// [QuerySeedColumns] prepared in the caller's transaction, and returns the
// highest fence seeded.
func Seed(ctx context.Context, st *sql.Stmt, recs []idemdriver.Record) (top int64, err error) {
	for _, r := range recs {
		ids, err := json.Marshal(NonNil(r.ResourceIDs))
		if err != nil {
			return 0, err
		}
		var lease sql.NullInt64
		if !r.LeaseExpiresAt.IsZero() {
			lease = sql.NullInt64{Int64: r.LeaseExpiresAt.UnixMicro(), Valid: true}
		}
		var result any
		if r.Result != nil {
			result = r.Result
		}
		if _, err := st.ExecContext(ctx, r.Scope, r.Operation, r.KeyDigest, r.Fingerprint, string(r.Status), result,
			r.ResponseCode, r.CorrelationID, r.ExternalRef, string(ids), r.LastError, r.Token, r.Fence, lease,
			r.Attempts, r.Version, r.CreatedAt.UnixMicro(), r.UpdatedAt.UnixMicro(), r.ExpiresAt.UnixMicro(), r.KeyHash); err != nil {
			return 0, fmt.Errorf("record %s/%s: %w", r.Scope, r.Operation, err)
		}
		top = max(top, r.Fence)
	}
	return top, nil
}

// CountKeys is a driver's [idemdriver.Admin.CountKeys]: it checks f (its
// cursor ignored, as the contract says, and not checked either), clamps
// upTo and runs the count that build writes for them on ex. A refused
// filter's error is returned as f.Check returns it; the database's is
// prefixed with "<name>: count keys".
func CountKeys(ctx context.Context, ex Executor, name string, f idemdriver.KeyFilter, upTo int, build func(q idemdriver.KeyQuery, upTo int) (string, []any)) (idemdriver.KeyCount, error) {
	f.After = ""
	q, err := f.Check()
	if err != nil {
		return idemdriver.KeyCount{}, err
	}
	upTo = idemdriver.ClampCountUpTo(upTo)
	query, args := build(q, upTo)
	var n int64
	if err := ex.QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
		return idemdriver.KeyCount{}, fmt.Errorf("%s: count keys: %w", name, err)
	}
	return idemdriver.CappedCount(n, upTo), nil
}
