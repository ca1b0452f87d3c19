package pgtest

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Explain returns PostgreSQL's plan of sql with args, one line a node, as
// planned with sequential scans and sorts priced out (enable_seqscan and
// enable_sort off, for its transaction only): a plan that still scans or
// sorts has no index to serve it. The drivers' query-plan tests use it.
func Explain(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) string {
	t.Helper()
	var lines []string
	err := pgx.BeginFunc(t.Context(), pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(t.Context(), "SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off"); err != nil {
			return err
		}
		rows, err := tx.Query(t.Context(), "EXPLAIN "+sql, args...)
		if err != nil {
			return err
		}
		lines, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		t.Fatalf("explain %s: %v", sql, err)
	}
	return strings.Join(lines, "\n")
}
