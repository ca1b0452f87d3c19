package sagapgx

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/saga/internal/sqlstore"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

// TestExplainAdmin checks that every admin list reads an index in the
// list's order and stops after the page: no sequential scan, and no sort
// but where a filter's rows come from another index.
func TestExplainAdmin(t *testing.T) {
	t.Parallel()
	pool := pgtest.Schema(t)
	d := New(pool)
	require.NoError(t, d.Migrate(t.Context()))
	at := time.Now().UTC().Truncate(time.Second)
	op := sagadriver.Operation{ID: "op-1", Type: "signup", Status: sagadriver.StatusRunning, CorrelationID: "c", Input: []byte(`{}`),
		Version: 1, CreatedAt: at, UpdatedAt: at, Steps: []sagadriver.StepRecord{{Name: "a", Kind: sagadriver.Compensatable,
			Status: sagadriver.StepCompleted, Key: "op-1/a", ExternalID: "e", MaxAttempts: 1, CompKey: "op-1/a/c", UpdatedAt: at}}}
	require.NoError(t, d.WithinTx(t.Context(), func(ctx context.Context, tx pgx.Tx) error { return d.InsertOperation(ctx, tx, &op) }))
	explain := func(sql string, args ...any) string {
		t.Helper()
		return pgtest.Explain(t, pool, sql, args...)
	}
	after := sagadriver.Cursor(op)
	cases := []struct {
		name   string
		f      sagadriver.OperationFilter
		index  string
		sorted bool
	}{
		{"all", sagadriver.OperationFilter{}, "unstuck_console_saga_operation_updated_idx", false},
		{"all, next page", sagadriver.OperationFilter{After: after}, "unstuck_console_saga_operation_updated_idx", false},
		{"time range", sagadriver.OperationFilter{From: at, To: at.Add(time.Hour)}, "unstuck_console_saga_operation_updated_idx", false},
		{"status", sagadriver.OperationFilter{Status: sagadriver.StatusReviewRequired}, "unstuck_console_saga_operation_status_idx", false},
		{"status, next page", sagadriver.OperationFilter{Status: sagadriver.StatusRunning, After: after}, "unstuck_console_saga_operation_status_idx", false},
		{"type", sagadriver.OperationFilter{Type: "signup"}, "unstuck_console_saga_operation_type_idx", false},
		{"correlation", sagadriver.OperationFilter{CorrelationID: "c"}, "", true},
		{"external id", sagadriver.OperationFilter{ExternalID: "e"}, "unstuck_console_saga_step_external_idx", true},
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
		sql, args := d.store.ListSQL(q)
		plan := explain(sql, args...)
		require.NotContains(t, plan, "Seq Scan", "%s:\n%s", tc.name, plan)
		if !tc.sorted {
			require.NotContains(t, plan, "Sort", "%s:\n%s", tc.name, plan)
		}
		if tc.index != "" {
			require.Contains(t, plan, tc.index, "%s:\n%s", tc.name, plan)
		}
	}
	plan := explain(sqlstore.CountsSQL, []string{"running"}, 10001)
	require.NotContains(t, plan, "Seq Scan", plan)
	require.Contains(t, plan, "Index Only Scan using unstuck_console_saga_operation_status_idx", plan)
	plan = explain(sqlstore.ReviewRequiredSQL, 50)
	require.NotContains(t, plan, "Seq Scan", plan)
	require.NotContains(t, plan, "Sort", plan)
}
