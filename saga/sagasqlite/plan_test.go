package sagasqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// TestExplainAdmin checks that SQLite answers each admin list from an
// index in the list's order: no full scan of the table, no temporary
// B-tree for the ORDER BY but where a filter's rows come from another
// index.
func TestExplainAdmin(t *testing.T) {
	t.Parallel()
	db, err := idemsqlite.Open(filepath.Join(t.TempDir(), "saga.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	d := New(db)
	require.NoError(t, d.Migrate(t.Context()))
	at := time.Now().UTC().Truncate(time.Second)
	op := sagadriver.Operation{ID: "op-1", Type: "signup", Status: sagadriver.StatusRunning, CorrelationID: "c", Input: []byte(`{}`),
		Version: 1, CreatedAt: at, UpdatedAt: at}
	require.NoError(t, d.WithinTx(t.Context(), func(ctx context.Context, tx *sql.Tx) error { return d.InsertOperation(ctx, tx, &op) }))
	explain := func(query string, args ...any) string {
		t.Helper()
		rows, err := db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query, args...)
		require.NoError(t, err)
		defer rows.Close()
		var lines []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &notused, &detail))
			lines = append(lines, detail)
		}
		require.NoError(t, rows.Err())
		return strings.Join(lines, "\n")
	}
	cases := []struct {
		name   string
		f      sagadriver.OperationFilter
		sorted bool
	}{
		{"all", sagadriver.OperationFilter{}, false},
		{"all, next page", sagadriver.OperationFilter{After: sagadriver.Cursor(op)}, false},
		{"status", sagadriver.OperationFilter{Status: sagadriver.StatusReviewRequired}, false},
		{"type", sagadriver.OperationFilter{Type: "signup"}, false},
		{"time range", sagadriver.OperationFilter{From: at, To: at.Add(time.Hour)}, false},
		{"correlation", sagadriver.OperationFilter{CorrelationID: "c"}, true},
		{"external id", sagadriver.OperationFilter{ExternalID: "e"}, true},
	}
	// Oldest first, each query again: the same index, read backward.
	for _, tc := range cases {
		tc.name += ", oldest first"
		tc.f.Order = sagadriver.OrderOldest
		if tc.f.After != "" {
			tc.f.After = sagadriver.CursorOrder(op, sagadriver.OrderOldest)
		}
		cases = append(cases, tc)
	}
	for _, tc := range cases {
		q, err := tc.f.Check()
		require.NoError(t, err, tc.name)
		query, args := d.store.ListSQL(q)
		plan := explain(query, args...)
		require.NotRegexp(t, `SCAN unstuck_saga_operation$|SCAN unstuck_saga_operation\n`, plan, "%s:\n%s", tc.name, plan)
		if !tc.sorted {
			require.NotContains(t, plan, "TEMP B-TREE", "%s:\n%s", tc.name, plan)
		}
	}
}
