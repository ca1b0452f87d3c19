package store

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/sagapgx"
	"github.com/unstuckhq/unstuck/saga/sagasqlite"
)

// opBundle is a testBundle whose database has the saga tables too, and a
// way to write operations through the saga driver's public API.
type opBundle struct {
	testBundle
	write func(t *testing.T, op saga.Operation, events []saga.Event, findings []saga.Finding)
}

// sagaWriter writes records the way the engine does, through its driver.
func sagaWriter[TTx any](d saga.Driver[TTx]) func(t *testing.T, op saga.Operation, events []saga.Event, findings []saga.Finding) {
	return func(t *testing.T, op saga.Operation, events []saga.Event, findings []saga.Finding) {
		t.Helper()
		require.NoError(t, d.WithinTx(t.Context(), func(ctx context.Context, tx TTx) error {
			if err := d.InsertOperation(ctx, tx, &op); err != nil {
				return err
			}
			if err := d.InsertEvents(ctx, tx, events); err != nil {
				return err
			}
			for i := range findings {
				if _, err := d.InsertFinding(ctx, tx, &findings[i]); err != nil {
					return err
				}
			}
			return nil
		}))
	}
}

// setupSagaPostgres migrates a schema of its own in the binaries' order:
// idem, saga, console, console operations.
func setupSagaPostgres(t *testing.T) opBundle {
	t.Helper()
	b := setupPostgres(t)
	d := sagapgx.New(b.pool)
	require.NoError(t, d.Migrate(t.Context()))
	require.NoError(t, b.db.MigrateOperations(t.Context()))
	return opBundle{testBundle: b, write: sagaWriter(d)}
}

// setupSagaSQLite migrates a database file of its own in the same order.
func setupSagaSQLite(t *testing.T) opBundle {
	t.Helper()
	b := setupSQLite(t)
	d := sagasqlite.New(b.sqlDB)
	require.NoError(t, d.Migrate(t.Context()))
	require.NoError(t, b.db.MigrateOperations(t.Context()))
	return opBundle{testBundle: b, write: sagaWriter(d)}
}

// eachSagaDialect runs fn as a parallel subtest per dialect, on fresh
// state with the saga tables.
func eachSagaDialect(t *testing.T, fn func(t *testing.T, b opBundle)) {
	t.Helper()
	for _, d := range []struct {
		name  string
		setup func(*testing.T) opBundle
	}{
		{DialectPostgres, setupSagaPostgres},
		{DialectSQLite, setupSagaSQLite},
	} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			fn(t, d.setup(t))
		})
	}
}

// opOpts describes an operation for opBundle.op; zero fields get defaults.
type opOpts struct {
	ID            string      // random
	Type          string      // "signup"
	Status        saga.Status // running
	CorrelationID string
	At            time.Time // base: created and updated then
	ExternalID    string    // the first step's
	Events        int       // how many events besides "started"
}

// op writes an operation of two steps with its events, and returns it as
// written.
func (b opBundle) op(t *testing.T, o opOpts) saga.Operation {
	t.Helper()
	o.ID = cmp.Or(o.ID, "op-"+rand.Text())
	o.Type = cmp.Or(o.Type, "signup")
	o.Status = cmp.Or(o.Status, saga.StatusRunning)
	if o.At.IsZero() {
		o.At = base
	}
	started := o.At.Add(-time.Minute)
	op := saga.Operation{ID: o.ID, Type: o.Type, Status: o.Status, CorrelationID: o.CorrelationID,
		Input: json.RawMessage(`{"email":"a@example.com"}`), CurrentStep: "workspace", Version: 3,
		CreatedAt: started, UpdatedAt: o.At,
		Steps: []saga.StepRecord{
			{Name: "account", Seq: 0, Kind: saga.Compensatable, System: "local", Status: saga.StepCompleted,
				Key: o.ID + "/account", ExternalID: o.ExternalID, Result: json.RawMessage(`{"external_id":"acc-1"}`),
				Attempts: 1, MaxAttempts: 5, Compensable: true, CompSeq: 2, CompKey: o.ID + "/account/compensate",
				CompMaxAttempts: 5, Generation: 1, StartedAt: &started, FinishedAt: &started, UpdatedAt: started},
			{Name: "workspace", Seq: 1, Kind: saga.Pivot, System: "workspace-provider", Status: saga.StepRetrying,
				Key: o.ID + "/workspace", Attempts: 2, MaxAttempts: 5, Verifications: 1, LastError: "provider: 503",
				LastErrorClass: saga.ClassTransient, Compensable: true, CompSeq: 1, CompKey: o.ID + "/workspace/compensate",
				CompStatus: saga.CompNone, CompMaxAttempts: 3, Generation: 2, StartedAt: &o.At, UpdatedAt: o.At},
		}}
	if o.Status.Terminal() {
		op.FinishedAt = &o.At
	}
	events := []saga.Event{{OperationID: o.ID, Action: "started", To: "pending", Actor: "app", At: started}}
	for i := range o.Events {
		events = append(events, saga.Event{OperationID: o.ID, Step: "workspace", Action: "step_retrying",
			From: "running", To: "retrying", Actor: "worker", Message: "attempt " + strconv.Itoa(i+1), Attempt: i + 1,
			At: started.Add(time.Duration(i+1) * time.Second)})
	}
	b.write(t, op, events, nil)
	return op
}

func opIDs(ops []saga.Operation) []string {
	out := make([]string, len(ops))
	for i, op := range ops {
		out[i] = op.ID
	}
	return out
}

// listed is op as the list returns it: no steps, no input.
func listed(op saga.Operation) saga.Operation {
	op.Steps, op.Input = nil, nil
	return op
}

func TestMigrateOperations(t *testing.T) {
	t.Parallel()
	t.Run("postgres needs the saga tables first", func(t *testing.T) {
		t.Parallel()
		b := setupPostgres(t)
		require.ErrorContains(t, b.db.MigrateOperations(t.Context()), "unstuck_saga_operation not found")
	})
	t.Run("sqlite needs the saga tables first", func(t *testing.T) {
		t.Parallel()
		b := setupSQLite(t)
		require.ErrorContains(t, b.db.MigrateOperations(t.Context()), "unstuck_saga_operation not found")
	})
	eachSagaDialect(t, func(t *testing.T, b opBundle) {
		require.NoError(t, b.db.MigrateOperations(t.Context()), "second MigrateOperations")
		q := `SELECT count(*) FROM unstuck_migration WHERE line = 'console_operations' AND version = 1`
		var n int
		if b.pool != nil {
			require.NoError(t, b.pool.QueryRow(t.Context(), q).Scan(&n))
		} else {
			require.NoError(t, b.sqlDB.QueryRowContext(t.Context(), q).Scan(&n))
		}
		require.Equal(t, 1, n)
	})
}

func TestListOperationsFilters(t *testing.T) {
	t.Parallel()
	eachSagaDialect(t, func(t *testing.T, b opBundle) {
		at := func(minutes int) time.Time { return base.Add(time.Duration(minutes) * time.Minute) }
		running := b.op(t, opOpts{At: at(1), CorrelationID: "order-1"})
		review := b.op(t, opOpts{Status: saga.StatusReviewRequired, At: at(2), ExternalID: "ws-42"})
		done := b.op(t, opOpts{Status: saga.StatusCompleted, At: at(3), Type: "refund", CorrelationID: "order-1"})
		comp := b.op(t, opOpts{Status: saga.StatusCompensated, At: at(4)})

		for _, tc := range []struct {
			name string
			f    OperationFilter
			want []saga.Operation
		}{
			{"all, newest first", OperationFilter{}, []saga.Operation{comp, done, review, running}},
			{"status", OperationFilter{Status: saga.StatusReviewRequired}, []saga.Operation{review}},
			{"status without match", OperationFilter{Status: saga.StatusFailed}, nil},
			{"type", OperationFilter{Type: "refund"}, []saga.Operation{done}},
			{"correlation", OperationFilter{CorrelationID: "order-1"}, []saga.Operation{done, running}},
			{"correlation and status", OperationFilter{CorrelationID: "order-1", Status: saga.StatusRunning}, []saga.Operation{running}},
			{"external id of a step", OperationFilter{ExternalID: "ws-42"}, []saga.Operation{review}},
			{"empty external id matches nothing", OperationFilter{ExternalID: "nope"}, nil},
			{"from", OperationFilter{From: at(3)}, []saga.Operation{comp, done}},
			{"to", OperationFilter{To: at(2)}, []saga.Operation{running}},
			{"from and to", OperationFilter{From: at(2), To: at(4)}, []saga.Operation{done, review}},
		} {
			page, err := b.db.ListOperations(t.Context(), tc.f)
			require.NoError(t, err, tc.name)
			require.Empty(t, page.Next, tc.name)
			if len(tc.want) == 0 {
				require.Empty(t, page.Operations, tc.name)
				continue
			}
			var want []saga.Operation
			for _, op := range tc.want {
				want = append(want, listed(op))
			}
			require.Equal(t, want, page.Operations, tc.name)
		}

		_, err := b.db.ListOperations(t.Context(), OperationFilter{Status: "stuck"})
		require.ErrorIs(t, err, ErrInvalid)
		var fe *FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "status", fe.Field)
	})
}

func TestListOperationsPagination(t *testing.T) {
	t.Parallel()
	eachSagaDialect(t, func(t *testing.T, b opBundle) {
		// 60 operations in groups of 7 sharing one updated_at, so that pages
		// end inside groups of ties; every fifth under review.
		var all, review []saga.Operation
		for i := range 60 {
			status := saga.StatusCompleted
			if i%5 == 0 {
				status = saga.StatusReviewRequired
			}
			all = append(all, b.op(t, opOpts{Status: status, At: base.Add(time.Duration(i/7) * time.Second)}))
		}
		slices.SortFunc(all, func(x, y saga.Operation) int {
			return cmp.Or(y.UpdatedAt.Compare(x.UpdatedAt), strings.Compare(y.ID, x.ID))
		})
		for _, op := range all {
			if op.Status == saga.StatusReviewRequired {
				review = append(review, op)
			}
		}

		walk := func(f OperationFilter) [][]string {
			var pages [][]string
			for {
				page, err := b.db.ListOperations(t.Context(), f)
				require.NoError(t, err)
				pages = append(pages, opIDs(page.Operations))
				if page.Next == "" {
					return pages
				}
				require.Len(t, page.Operations, clampLimit(f.Limit), "only the last page is short")
				f.After = page.Next
				require.Less(t, len(pages), 200, "paging ends")
			}
		}
		for _, tc := range []struct {
			f     OperationFilter
			want  []saga.Operation
			pages int
		}{
			{OperationFilter{Limit: 25}, all, 3},
			{OperationFilter{Limit: 20}, all, 3}, // an exact multiple: no empty last page
			{OperationFilter{Limit: 1}, all, 60},
			{OperationFilter{}, all, 2},
			{OperationFilter{Limit: 5, Status: saga.StatusReviewRequired}, review, 3},
			{OperationFilter{Limit: 4, Type: "signup"}, all, 15},
		} {
			pages := walk(tc.f)
			require.Len(t, pages, tc.pages, "%+v", tc.f)
			require.Equal(t, opIDs(tc.want), slices.Concat(pages...), "%+v: every operation once, in order", tc.f)
		}
	})
}

func TestListOperationsBadCursor(t *testing.T) {
	t.Parallel()
	enc := base64.RawURLEncoding.EncodeToString
	good := opCursor{updatedAt: base.UnixMicro(), id: "op-ü/1"}.encode()
	c, err := decodeOpCursor(good)
	require.NoError(t, err)
	require.Equal(t, opCursor{updatedAt: base.UnixMicro(), id: "op-ü/1"}, c)
	keyCursor := idemdriver.EncodeCursor(idemdriver.Record{ID: 42, UpdatedAt: base})
	noID := enc([]byte(mustDecode(t, good))[:9])
	badUTF8 := enc(append([]byte(mustDecode(t, good))[:9], 0xff))
	long := opCursor{updatedAt: 1, id: strings.Repeat("x", maxCursorID+1)}.encode()

	eachSagaDialect(t, func(t *testing.T, b opBundle) {
		op := b.op(t, opOpts{ID: "op-a"})
		for _, bad := range []string{"!!!", good + "=", enc([]byte("hello")), keyCursor, noID, badUTF8, long} {
			_, err := b.db.ListOperations(t.Context(), OperationFilter{After: bad})
			require.ErrorIs(t, err, ErrInvalidCursor, "%q", bad)
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, "after", fe.Field)
		}
		page, err := b.db.ListOperations(t.Context(), OperationFilter{After: opCursor{updatedAt: base.UnixMicro(), id: "op-b"}.encode()})
		require.NoError(t, err, "a well-formed cursor is only a position")
		require.Equal(t, []string{op.ID}, opIDs(page.Operations), "op-a sorts before (base, op-b)")
		page, err = b.db.ListOperations(t.Context(), OperationFilter{After: opCursorOf(op).encode()})
		require.NoError(t, err)
		require.Empty(t, page.Operations, "nothing after the only operation")
	})
}

func TestOperationDetail(t *testing.T) {
	t.Parallel()
	eachSagaDialect(t, func(t *testing.T, b opBundle) {
		op := b.op(t, opOpts{Status: saga.StatusReviewRequired, CorrelationID: "order-9", ExternalID: "acc-1", Events: 3})
		finding := saga.Finding{OperationID: op.ID, Step: "workspace", Kind: saga.FindingOrphanExternal,
			ExternalID: "ws-9", Detail: "the provider has a workspace we do not record", DetectedAt: base}
		b.op(t, opOpts{}) // another operation, whose steps and events stay out

		det, ok, err := b.db.Operation(t.Context(), op.ID)
		require.NoError(t, err)
		require.True(t, ok)
		require.WithinDuration(t, time.Now(), det.ReadAt, 5*time.Second)
		require.JSONEq(t, string(op.Input), string(det.Operation.Input))
		require.JSONEq(t, string(op.Steps[0].Result), string(det.Operation.Steps[0].Result))
		want := op
		want.Input = det.Operation.Input
		want.Steps = slices.Clone(op.Steps)
		want.Steps[0].Result = det.Operation.Steps[0].Result
		require.Equal(t, want, det.Operation, "every field, steps in order")
		require.Len(t, det.Events, 4)
		require.Equal(t, "started", det.Events[0].Action)
		require.Equal(t, "step_retrying", det.Events[3].Action)
		require.Equal(t, 3, det.Events[3].Attempt)
		require.Equal(t, base.Add(-time.Minute+3*time.Second), det.Events[3].At)
		require.Zero(t, det.EventsOmitted)
		require.Empty(t, det.Findings)

		// A finding, then a resolved one: both listed, in order.
		b.write(t, saga.Operation{ID: "op-f", Type: "signup", Status: saga.StatusReviewRequired, Input: json.RawMessage(`{}`),
			Version: 1, CreatedAt: base, UpdatedAt: base}, nil, []saga.Finding{
			func() saga.Finding { f := finding; f.OperationID = "op-f"; return f }(),
			{OperationID: "op-f", Kind: saga.FindingUnresolved, Detail: "stuck", DetectedAt: base.Add(time.Second)},
		})
		det, ok, err = b.db.Operation(t.Context(), "op-f")
		require.NoError(t, err)
		require.True(t, ok)
		require.Len(t, det.Findings, 2)
		require.Equal(t, saga.FindingOrphanExternal, det.Findings[0].Kind)
		require.Equal(t, "ws-9", det.Findings[0].ExternalID)
		require.Equal(t, base, det.Findings[0].DetectedAt)
		require.Nil(t, det.Findings[0].ResolvedAt)
		require.Empty(t, det.Operation.Steps)

		_, ok, err = b.db.Operation(t.Context(), "no-such-operation")
		require.NoError(t, err)
		require.False(t, ok)

		// Only the latest events, oldest first, with the count left out.
		long := b.op(t, opOpts{Events: 9})
		if b.pool != nil {
			det, ok, err = pgOperation(t.Context(), b.pool, long.ID, 4)
		} else {
			det, ok, err = sqliteOperation(t.Context(), b.sqlDB, long.ID, 4)
		}
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, int64(6), det.EventsOmitted, "started and the first five retries")
		require.Len(t, det.Events, 4)
		for i, e := range det.Events {
			require.Equal(t, 6+i, e.Attempt, "the latest four, oldest first")
		}
	})
}

func TestOperationOverview(t *testing.T) {
	t.Parallel()
	eachSagaDialect(t, func(t *testing.T, b opBundle) {
		o, err := b.db.OperationOverview(t.Context())
		require.NoError(t, err)
		require.True(t, o.Available)
		require.Len(t, o.Counts, len(saga.Statuses))
		for i, c := range o.Counts {
			require.Equal(t, OperationCount{Status: saga.Statuses[i], Exact: true}, c, "empty")
		}

		at := func(minutes int) time.Time { return base.Add(time.Duration(minutes) * time.Minute) }
		b.op(t, opOpts{At: at(3)})
		b.op(t, opOpts{At: at(1)})
		b.op(t, opOpts{Status: saga.StatusReviewRequired, At: at(5)})
		b.op(t, opOpts{Status: saga.StatusReviewRequired, At: at(2)})
		b.op(t, opOpts{Status: saga.StatusCompleted, At: at(9)})

		o, err = b.db.OperationOverview(t.Context())
		require.NoError(t, err)
		require.Equal(t, []OperationCount{
			{Status: saga.StatusPending, Exact: true},
			{Status: saga.StatusRunning, Count: 2, Exact: true, Oldest: at(1)},
			{Status: saga.StatusCompensating, Exact: true},
			{Status: saga.StatusReviewRequired, Count: 2, Exact: true, Oldest: at(2)},
			{Status: saga.StatusFailed, Exact: true},
			{Status: saga.StatusCompensated, Exact: true},
			{Status: saga.StatusCompleted, Count: 1, Exact: true, Oldest: at(9)},
		}, o.Counts)
		require.WithinDuration(t, time.Now(), o.AsOf, 5*time.Second)
		require.Equal(t, int64(2), o.Count(saga.StatusReviewRequired).Count)
	})
}

func TestOperationOverviewEstimates(t *testing.T) {
	t.Parallel()
	b := setupSagaPostgres(t)
	b.db.countCap = 5
	for range 12 {
		b.op(t, opOpts{Status: saga.StatusCompleted})
	}
	for range 3 {
		b.op(t, opOpts{Status: saga.StatusReviewRequired})
	}
	o, err := b.db.OperationOverview(t.Context())
	require.NoError(t, err)
	require.Equal(t, OperationCount{Status: saga.StatusCompleted, Count: 6, Exact: false, Oldest: base}, o.Count(saga.StatusCompleted),
		"no statistics yet: the capped count, a lower bound")
	require.Equal(t, OperationCount{Status: saga.StatusReviewRequired, Count: 3, Exact: true, Oldest: base}, o.Count(saga.StatusReviewRequired))

	_, err = b.pool.Exec(t.Context(), "ANALYZE unstuck_saga_operation")
	require.NoError(t, err)
	o, err = b.db.OperationOverview(t.Context())
	require.NoError(t, err)
	require.Equal(t, OperationCount{Status: saga.StatusCompleted, Count: 12, Exact: false, Oldest: base}, o.Count(saga.StatusCompleted))
	var analyzed time.Time
	require.NoError(t, b.pool.QueryRow(t.Context(),
		`SELECT last_analyze FROM pg_stat_user_tables WHERE relid = 'unstuck_saga_operation'::regclass`).Scan(&analyzed))
	require.Equal(t, analyzed.UTC(), o.AsOf, "estimates are as of the last ANALYZE")
}

func TestReviewRequired(t *testing.T) {
	t.Parallel()
	eachSagaDialect(t, func(t *testing.T, b opBundle) {
		at := func(minutes int) time.Time { return base.Add(time.Duration(minutes) * time.Minute) }
		late := b.op(t, opOpts{Status: saga.StatusReviewRequired, At: at(5)})
		b.op(t, opOpts{At: at(0)})
		b.op(t, opOpts{Status: saga.StatusFailed, At: at(0)})
		early := b.op(t, opOpts{Status: saga.StatusReviewRequired, At: at(1)})
		tied := b.op(t, opOpts{ID: "op-zz", Status: saga.StatusReviewRequired, At: at(1)})

		got, err := b.db.ReviewRequired(t.Context(), 0)
		require.NoError(t, err)
		require.Equal(t, []saga.Operation{listed(early), listed(tied), listed(late)}, got, "longest waiting first, ties by id")
		got, err = b.db.ReviewRequired(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, []string{early.ID}, opIDs(got))
	})
}

// TestOperationsWithoutSagaTables: a console migrated without the saga
// engine shows no operations rather than failing.
func TestOperationsWithoutSagaTables(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		page, err := b.db.ListOperations(t.Context(), OperationFilter{Status: saga.StatusRunning})
		require.NoError(t, err)
		require.Empty(t, page.Operations)
		_, ok, err := b.db.Operation(t.Context(), "op-1")
		require.NoError(t, err)
		require.False(t, ok)
		o, err := b.db.OperationOverview(t.Context())
		require.NoError(t, err)
		require.False(t, o.Available)
		require.Len(t, o.Counts, len(saga.Statuses))
		ops, err := b.db.ReviewRequired(t.Context(), 10)
		require.NoError(t, err)
		require.Empty(t, ops)
	})
	t.Run("a bad filter is still refused", func(t *testing.T) {
		t.Parallel()
		sqlDB, err := idemsqlite.Open(filepath.Join(t.TempDir(), "empty.db"))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, sqlDB.Close()) })
		_, err = NewSQLite(sqlDB).ListOperations(t.Context(), OperationFilter{After: "garbage"})
		require.ErrorIs(t, err, ErrInvalidCursor)
	})
}

// TestExplainOperationsPostgres checks, as TestExplainPostgres does for
// keys, that every list query reads an index in the list's order and stops
// after the page.
func TestExplainOperationsPostgres(t *testing.T) {
	t.Parallel()
	b := setupSagaPostgres(t)
	op := b.op(t, opOpts{CorrelationID: "c", ExternalID: "e"})
	after := opCursorOf(op).encode()
	explain := func(sql string, args ...any) string {
		t.Helper()
		var lines []string
		err := pgx.BeginFunc(t.Context(), b.pool, func(tx pgx.Tx) error {
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
		require.NoError(t, err)
		return strings.Join(lines, "\n")
	}
	for _, tc := range []struct {
		name   string
		f      OperationFilter
		index  string
		sorted bool
	}{
		{"all", OperationFilter{}, "unstuck_console_saga_operation_updated_idx", false},
		{"all, next page", OperationFilter{After: after}, "unstuck_console_saga_operation_updated_idx", false},
		{"time range", OperationFilter{From: base, To: base.Add(time.Hour)}, "unstuck_console_saga_operation_updated_idx", false},
		{"status", OperationFilter{Status: saga.StatusReviewRequired}, "unstuck_console_saga_operation_status_idx", false},
		{"status, next page", OperationFilter{Status: saga.StatusRunning, After: after}, "unstuck_console_saga_operation_status_idx", false},
		{"type", OperationFilter{Type: "signup"}, "unstuck_console_saga_operation_type_idx", false},
		{"correlation", OperationFilter{CorrelationID: "c"}, "", true},
		{"external id", OperationFilter{ExternalID: "e"}, "unstuck_console_saga_step_external_idx", true},
	} {
		q, err := tc.f.check()
		require.NoError(t, err, tc.name)
		sql, args := pgOperationListSQL(q)
		plan := explain(sql, args...)
		require.NotContains(t, plan, "Seq Scan", "%s:\n%s", tc.name, plan)
		if !tc.sorted {
			require.NotContains(t, plan, "Sort", "%s:\n%s", tc.name, plan)
		}
		if tc.index != "" {
			require.Contains(t, plan, tc.index, "%s:\n%s", tc.name, plan)
		}
	}
	plan := explain(pgOperationCountsSQL, []string{"running"}, 10001)
	require.NotContains(t, plan, "Seq Scan", plan)
	require.Contains(t, plan, "Index Only Scan using unstuck_console_saga_operation_status_idx", plan)
	plan = explain(pgReviewRequiredSQL, 50)
	require.NotContains(t, plan, "Seq Scan", plan)
	require.NotContains(t, plan, "Sort", plan)
	for _, q := range []string{pgStepsSQL, pgFindingsSQL} {
		plan = explain(q, op.ID)
		require.NotContains(t, plan, "Seq Scan", plan)
	}
	plan = explain(pgEventsSQL, op.ID, 1001)
	require.NotContains(t, plan, "Seq Scan", plan)
	require.NotContains(t, plan, "Sort", plan)
}

// TestExplainOperationsSQLite checks that SQLite too answers each list from
// an index in the list's order: no full scan of the table, no temporary
// B-tree for the ORDER BY.
func TestExplainOperationsSQLite(t *testing.T) {
	t.Parallel()
	b := setupSagaSQLite(t)
	op := b.op(t, opOpts{CorrelationID: "c", ExternalID: "e"})
	explain := func(sql string, args ...any) string {
		t.Helper()
		rows, err := b.sqlDB.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+sql, args...)
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
	for _, tc := range []struct {
		name   string
		f      OperationFilter
		sorted bool
	}{
		{"all", OperationFilter{}, false},
		{"all, next page", OperationFilter{After: opCursorOf(op).encode()}, false},
		{"status", OperationFilter{Status: saga.StatusReviewRequired}, false},
		{"type", OperationFilter{Type: "signup"}, false},
		{"time range", OperationFilter{From: base, To: base.Add(time.Hour)}, false},
		{"correlation", OperationFilter{CorrelationID: "c"}, true},
		{"external id", OperationFilter{ExternalID: "e"}, true},
	} {
		q, err := tc.f.check()
		require.NoError(t, err, tc.name)
		sql, args := sqliteOperationListSQL(q)
		plan := explain(sql, args...)
		require.NotRegexp(t, `SCAN unstuck_saga_operation$|SCAN unstuck_saga_operation\n`, plan, "%s:\n%s", tc.name, plan)
		if !tc.sorted {
			require.NotContains(t, plan, "TEMP B-TREE", "%s:\n%s", tc.name, plan)
		}
	}
}
