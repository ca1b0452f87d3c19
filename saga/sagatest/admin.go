package sagatest

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// runAdmin checks the admin read contract.
func runAdmin[TTx any](t *testing.T, newFixture func(t *testing.T) Fixture[TTx]) {
	t.Run("PageFilters", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFixture)
		running := b.op(t, opOpts{At: at(1), CorrelationID: "order-1"})
		review := b.op(t, opOpts{Status: sagadriver.StatusReviewRequired, At: at(2), ExternalID: "ws-42"})
		done := b.op(t, opOpts{Status: sagadriver.StatusCompleted, At: at(3), Type: "refund", CorrelationID: "order-1"})
		comp := b.op(t, opOpts{Status: sagadriver.StatusCompensated, At: at(4)})

		type F = sagadriver.OperationFilter
		type ops = []sagadriver.Operation
		for _, tc := range []struct {
			name string
			f    F
			want ops
		}{
			{"all, newest first", F{}, ops{comp, done, review, running}},
			{"all, newest first by name", F{Order: sagadriver.OrderNewest}, ops{comp, done, review, running}},
			{"all, oldest first", F{Order: sagadriver.OrderOldest}, ops{running, review, done, comp}},
			{"correlation, oldest first", F{CorrelationID: "order-1", Order: sagadriver.OrderOldest}, ops{running, done}},
			{"status", F{Status: sagadriver.StatusReviewRequired}, ops{review}},
			{"status without match", F{Status: sagadriver.StatusFailed}, nil},
			{"type", F{Type: "refund"}, ops{done}},
			{"correlation", F{CorrelationID: "order-1"}, ops{done, running}},
			{"correlation and status", F{CorrelationID: "order-1", Status: sagadriver.StatusRunning}, ops{running}},
			{"external id of a step", F{ExternalID: "ws-42"}, ops{review}},
			{"unknown external id", F{ExternalID: "nope"}, nil},
			{"from", F{From: at(3)}, ops{comp, done}},
			{"to", F{To: at(2)}, ops{running}},
			{"from and to", F{From: at(2), To: at(4)}, ops{done, review}},
		} {
			page, err := b.Driver.PageOperations(t.Context(), tc.f)
			require.NoError(t, err, tc.name)
			require.Empty(t, page.Next, tc.name)
			var want ops
			for _, op := range tc.want {
				want = append(want, listed(op))
			}
			require.Equal(t, want, page.Operations, tc.name)
			n, err := b.Driver.CountFiltered(t.Context(), tc.f, 0)
			require.NoError(t, err, "count: %s", tc.name)
			require.Equal(t, sagadriver.FilteredCount{N: int64(len(tc.want)), Exact: true}, n, "count: %s", tc.name)
		}
		// Counted up to a cap: exact at it, "at least" beyond it.
		for upTo, want := range map[int]sagadriver.FilteredCount{4: {N: 4, Exact: true}, 3: {N: 3}, 1: {N: 1}} {
			n, err := b.Driver.CountFiltered(t.Context(), F{}, upTo)
			require.NoError(t, err)
			require.Equal(t, want, n, "count up to %d", upTo)
		}
		_, err := b.Driver.CountFiltered(t.Context(), F{Status: "stuck"}, 0)
		var cfe *sagadriver.FieldError
		require.ErrorAs(t, err, &cfe, "a filter is checked before it is counted")
		require.Equal(t, "status", cfe.Field)

		_, err = b.Driver.PageOperations(t.Context(), F{Status: "stuck"})
		require.ErrorIs(t, err, sagadriver.ErrInvalid)
		var fe *sagadriver.FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "status", fe.Field)
		_, err = b.Driver.PageOperations(t.Context(), F{Order: "sideways"})
		require.ErrorIs(t, err, sagadriver.ErrInvalid)
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "order", fe.Field)
	})

	t.Run("PageKeysetWithTies", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFixture)
		// 60 operations in groups of 7 sharing one updated_at, so that pages
		// end inside groups of ties; every fifth under review.
		var all, review []sagadriver.Operation
		for i := range 60 {
			status := sagadriver.StatusCompleted
			if i%5 == 0 {
				status = sagadriver.StatusReviewRequired
			}
			all = append(all, b.op(t, opOpts{Status: status, At: base.Add(time.Duration(i/7) * time.Second)}))
		}
		slices.SortFunc(all, func(x, y sagadriver.Operation) int {
			return cmp.Or(y.UpdatedAt.Compare(x.UpdatedAt), strings.Compare(y.ID, x.ID))
		})
		for _, op := range all {
			if op.Status == sagadriver.StatusReviewRequired {
				review = append(review, op)
			}
		}
		oldest, oldestReview := slices.Clone(all), slices.Clone(review)
		slices.Reverse(oldest)
		slices.Reverse(oldestReview)
		walk := func(f sagadriver.OperationFilter) [][]string {
			var pages [][]string
			for {
				page, err := b.Driver.PageOperations(t.Context(), f)
				require.NoError(t, err)
				pages = append(pages, ids(page.Operations))
				if page.Next == "" {
					return pages
				}
				require.Len(t, page.Operations, sagadriver.ClampLimit(f.Limit), "only the last page is short")
				f.After = page.Next
				require.Less(t, len(pages), 200, "paging ends")
			}
		}
		for _, tc := range []struct {
			f     sagadriver.OperationFilter
			want  []sagadriver.Operation
			pages int
		}{
			{sagadriver.OperationFilter{Limit: 25}, all, 3},
			{sagadriver.OperationFilter{Limit: 20}, all, 3}, // an exact multiple: no empty last page
			{sagadriver.OperationFilter{Limit: 1}, all, 60},
			{sagadriver.OperationFilter{}, all, 2},
			{sagadriver.OperationFilter{Limit: 5, Status: sagadriver.StatusReviewRequired}, review, 3},
			{sagadriver.OperationFilter{Limit: 4, Type: "signup"}, all, 15},
			// Oldest first: the reverse, paging through the same ties.
			{sagadriver.OperationFilter{Limit: 25, Order: sagadriver.OrderOldest}, oldest, 3},
			{sagadriver.OperationFilter{Limit: 1, Order: sagadriver.OrderOldest}, oldest, 60},
			{sagadriver.OperationFilter{Limit: 5, Order: sagadriver.OrderOldest, Status: sagadriver.StatusReviewRequired}, oldestReview, 3},
		} {
			pages := walk(tc.f)
			require.Len(t, pages, tc.pages, "%+v", tc.f)
			require.Equal(t, ids(tc.want), slices.Concat(pages...), "%+v: every operation once, in order", tc.f)
		}
	})

	t.Run("PageBadCursor", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFixture)
		op := b.op(t, opOpts{ID: "op-a"})
		enc := base64.RawURLEncoding.EncodeToString
		good := sagadriver.Cursor(sagadriver.Operation{ID: "op-ü/1", UpdatedAt: base})
		raw, err := base64.RawURLEncoding.DecodeString(good)
		require.NoError(t, err)
		keyCursor := enc(append([]byte{1}, raw[1:]...)) // another list's version byte
		noID := enc(raw[:9])
		badUTF8 := enc(append(slices.Clone(raw[:9]), 0xff))
		long := sagadriver.Cursor(sagadriver.Operation{ID: strings.Repeat("x", 513), UpdatedAt: base})
		for _, bad := range []string{"!!!", good + "=", enc([]byte("hello")), keyCursor, noID, badUTF8, long} {
			_, err := b.Driver.PageOperations(t.Context(), sagadriver.OperationFilter{After: bad})
			require.ErrorIs(t, err, sagadriver.ErrInvalidCursor, "%q", bad)
			var fe *sagadriver.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, "after", fe.Field)
		}
		page, err := b.Driver.PageOperations(t.Context(), sagadriver.OperationFilter{After: sagadriver.Cursor(sagadriver.Operation{ID: "op-b", UpdatedAt: base})})
		require.NoError(t, err, "a well-formed cursor is only a position")
		require.Equal(t, []string{op.ID}, ids(page.Operations), "op-a sorts before (base, op-b)")
		page, err = b.Driver.PageOperations(t.Context(), sagadriver.OperationFilter{After: sagadriver.Cursor(op)})
		require.NoError(t, err)
		require.Empty(t, page.Operations, "nothing after the only operation")

		// A cursor of one order is refused by the other, not read as a
		// position in the wrong direction.
		oldestCursor := sagadriver.CursorOrder(sagadriver.Operation{ID: "op-0", UpdatedAt: base}, sagadriver.OrderOldest)
		page, err = b.Driver.PageOperations(t.Context(), sagadriver.OperationFilter{Order: sagadriver.OrderOldest, After: oldestCursor})
		require.NoError(t, err)
		require.Equal(t, []string{op.ID}, ids(page.Operations), "op-a sorts after (base, op-0) oldest first")
		for _, f := range []sagadriver.OperationFilter{
			{After: oldestCursor},
			{Order: sagadriver.OrderNewest, After: oldestCursor},
			{Order: sagadriver.OrderOldest, After: good},
		} {
			_, err := b.Driver.PageOperations(t.Context(), f)
			require.ErrorIs(t, err, sagadriver.ErrInvalidCursor, "%+v", f)
			var fe *sagadriver.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, "after", fe.Field)
		}
	})

	t.Run("ReadOperation", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFixture)
		op := b.op(t, opOpts{Status: sagadriver.StatusReviewRequired, CorrelationID: "order-9", ExternalID: "acc-1", Events: 3})
		b.op(t, opOpts{Events: 2}) // another operation, whose steps and events stay out

		det, err := b.Driver.ReadOperation(t.Context(), op.ID, 0)
		require.NoError(t, err)
		require.WithinDuration(t, time.Now(), det.ReadAt, 5*time.Second)
		require.Equal(t, normalized(t, op, det.Operation), det.Operation, "every field, steps in order")
		require.Len(t, det.Events, 4)
		require.Equal(t, "started", det.Events[0].Action)
		require.Equal(t, "step_retrying", det.Events[3].Action)
		require.Equal(t, 3, det.Events[3].Attempt)
		require.Equal(t, op.CreatedAt.Add(3*time.Second), det.Events[3].At)
		require.Zero(t, det.EventsOmitted)
		require.Empty(t, det.Findings)

		// Findings, open and resolved, in order of detection.
		f := newOp(opOpts{ID: "op-f", Status: sagadriver.StatusReviewRequired})
		f.Steps = nil
		f.Input = json.RawMessage(`{}`)
		b.write(t, f, nil, []sagadriver.Finding{
			{OperationID: "op-f", Step: "workspace", Kind: sagadriver.FindingOrphanExternal, ExternalID: "ws-9",
				Detail: "the provider has a workspace we do not record", DetectedAt: base},
			{OperationID: "op-f", Kind: sagadriver.FindingUnresolved, Detail: "stuck", DetectedAt: base.Add(time.Second)},
		})
		det, err = b.Driver.ReadOperation(t.Context(), "op-f", 0)
		require.NoError(t, err)
		require.Len(t, det.Findings, 2)
		require.Equal(t, sagadriver.FindingOrphanExternal, det.Findings[0].Kind)
		require.Equal(t, "ws-9", det.Findings[0].ExternalID)
		require.Equal(t, base, det.Findings[0].DetectedAt)
		require.Nil(t, det.Findings[0].ResolvedAt)
		require.Equal(t, sagadriver.FindingUnresolved, det.Findings[1].Kind)
		require.Empty(t, det.Operation.Steps)

		_, err = b.Driver.ReadOperation(t.Context(), "no-such-operation", 0)
		require.ErrorIs(t, err, sagadriver.ErrNotFound)

		// Only the newest events, oldest first, with the count left out.
		long := b.op(t, opOpts{Events: 9})
		det, err = b.Driver.ReadOperation(t.Context(), long.ID, 4)
		require.NoError(t, err)
		require.Equal(t, int64(6), det.EventsOmitted, "started and the first five retries")
		require.Len(t, det.Events, 4)
		for i, e := range det.Events {
			require.Equal(t, 6+i, e.Attempt, "the newest four, oldest first")
		}
	})

	t.Run("CountOperations", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFixture)
		o, err := b.Driver.CountOperations(t.Context(), 0)
		require.NoError(t, err)
		require.Len(t, o.Counts, len(sagadriver.Statuses))
		for i, c := range o.Counts {
			require.Equal(t, sagadriver.OperationCount{Status: sagadriver.Statuses[i], Exact: true}, c, "empty")
		}
		b.op(t, opOpts{At: at(3)})
		b.op(t, opOpts{At: at(1)})
		b.op(t, opOpts{Status: sagadriver.StatusReviewRequired, At: at(5)})
		b.op(t, opOpts{Status: sagadriver.StatusReviewRequired, At: at(2)})
		b.op(t, opOpts{Status: sagadriver.StatusCompleted, At: at(9)})
		o, err = b.Driver.CountOperations(t.Context(), 0)
		require.NoError(t, err)
		require.Equal(t, []sagadriver.OperationCount{
			{Status: sagadriver.StatusPending, Exact: true},
			{Status: sagadriver.StatusRunning, Count: 2, Exact: true, Oldest: at(1)},
			{Status: sagadriver.StatusCompensating, Exact: true},
			{Status: sagadriver.StatusReviewRequired, Count: 2, Exact: true, Oldest: at(2)},
			{Status: sagadriver.StatusFailed, Exact: true},
			{Status: sagadriver.StatusCompensated, Exact: true},
			{Status: sagadriver.StatusCompleted, Count: 1, Exact: true, Oldest: at(9)},
		}, o.Counts)
		require.WithinDuration(t, time.Now(), o.AsOf, 5*time.Second)
		require.Equal(t, int64(2), o.Count(sagadriver.StatusReviewRequired).Count)
	})

	t.Run("CountOperationsBeyondTheCap", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFixture)
		for range 12 {
			b.op(t, opOpts{Status: sagadriver.StatusCompleted})
		}
		for range 3 {
			b.op(t, opOpts{Status: sagadriver.StatusReviewRequired})
		}
		o, err := b.Driver.CountOperations(t.Context(), 5)
		require.NoError(t, err)
		review := sagadriver.OperationCount{Status: sagadriver.StatusReviewRequired, Count: 3, Exact: true, Oldest: base}
		require.Equal(t, review, o.Count(sagadriver.StatusReviewRequired), "under the cap: exact")
		if b.Analyze == nil {
			require.Equal(t, sagadriver.OperationCount{Status: sagadriver.StatusCompleted, Count: 12, Exact: true, Oldest: base},
				o.Count(sagadriver.StatusCompleted), "a driver without estimates counts exactly")
			return
		}
		require.Equal(t, sagadriver.OperationCount{Status: sagadriver.StatusCompleted, Count: 6, Exact: false, Oldest: base},
			o.Count(sagadriver.StatusCompleted), "no statistics yet: the capped count, a lower bound")
		require.NoError(t, b.Analyze(t.Context()))
		o, err = b.Driver.CountOperations(t.Context(), 5)
		require.NoError(t, err)
		require.Equal(t, sagadriver.OperationCount{Status: sagadriver.StatusCompleted, Count: 12, Exact: false, Oldest: base},
			o.Count(sagadriver.StatusCompleted), "estimated from the statistics")
		require.Equal(t, review, o.Count(sagadriver.StatusReviewRequired))
		require.WithinDuration(t, time.Now(), o.AsOf, time.Minute, "as of the ANALYZE")
		o, err = b.Driver.CountOperations(t.Context(), 0)
		require.NoError(t, err)
		require.True(t, o.Count(sagadriver.StatusCompleted).Exact, "under the default cap: exact")
	})

	t.Run("ReviewRequired", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFixture)
		late := b.op(t, opOpts{Status: sagadriver.StatusReviewRequired, At: at(5)})
		b.op(t, opOpts{At: at(0)})
		b.op(t, opOpts{Status: sagadriver.StatusFailed, At: at(0)})
		early := b.op(t, opOpts{ID: "op-aa", Status: sagadriver.StatusReviewRequired, At: at(1)})
		tied := b.op(t, opOpts{ID: "op-zz", Status: sagadriver.StatusReviewRequired, At: at(1)})

		got, err := b.Driver.ReviewRequired(t.Context(), 0)
		require.NoError(t, err)
		require.Equal(t, []sagadriver.Operation{listed(early), listed(tied), listed(late)}, got, "longest waiting first, ties by id")
		got, err = b.Driver.ReviewRequired(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, []string{early.ID}, ids(got))
	})

	t.Run("EachOperation", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFixture)
		var all, review []string
		for i := range 40 {
			status := sagadriver.StatusCompleted
			if i%3 == 0 {
				status = sagadriver.StatusReviewRequired
			}
			op := b.op(t, opOpts{ID: fmt.Sprintf("op-%03d", i), Status: status, At: at(i % 4)})
			all = append(all, op.ID)
			if status == sagadriver.StatusReviewRequired {
				review = append(review, op.ID)
			}
		}
		each := func(f sagadriver.OperationFilter, size int) ([]string, []int) {
			t.Helper()
			var got []string
			var sizes []int
			require.NoError(t, b.Driver.EachOperation(t.Context(), f, size, func(ops []sagadriver.Operation) error {
				sizes = append(sizes, len(ops))
				for _, op := range ops {
					require.Nil(t, op.Steps)
					got = append(got, op.ID)
				}
				return nil
			}))
			return got, sizes
		}
		got, sizes := each(sagadriver.OperationFilter{}, 7)
		require.Equal(t, all, got, "every operation once, by ID")
		require.Equal(t, []int{7, 7, 7, 7, 7, 5}, sizes)
		got, _ = each(sagadriver.OperationFilter{Status: sagadriver.StatusReviewRequired}, 4)
		require.Equal(t, review, got)
		got, _ = each(sagadriver.OperationFilter{Status: sagadriver.StatusReviewRequired, From: at(3)}, 0)
		require.Equal(t, []string{"op-003", "op-015", "op-027", "op-039"}, got)
		got, sizes = each(sagadriver.OperationFilter{Type: "none"}, 0)
		require.Empty(t, got)
		require.Empty(t, sizes, "fn is not called for nothing")

		stop := fmt.Errorf("stop")
		calls := 0
		err := b.Driver.EachOperation(t.Context(), sagadriver.OperationFilter{}, 5, func([]sagadriver.Operation) error { calls++; return stop })
		require.ErrorIs(t, err, stop)
		require.Equal(t, 1, calls)
		err = b.Driver.EachOperation(t.Context(), sagadriver.OperationFilter{After: sagadriver.Cursor(sagadriver.Operation{ID: "x"})}, 5,
			func([]sagadriver.Operation) error { return nil })
		require.ErrorIs(t, err, sagadriver.ErrInvalid)
		err = b.Driver.EachOperation(t.Context(), sagadriver.OperationFilter{Status: "stuck"}, 5, func([]sagadriver.Operation) error { return nil })
		require.ErrorIs(t, err, sagadriver.ErrInvalid)
	})

	t.Run("EachOperationUnderUpdates", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFixture)
		var all []string
		for i := range 30 {
			all = append(all, b.op(t, opOpts{ID: fmt.Sprintf("op-%03d", i), At: at(i)}).ID)
		}
		// While the iteration runs, every batch moves operations both ahead
		// of it and behind it to the newest and the oldest update: an
		// iterator that paged by update time would see some twice and skip
		// others. They all match the filter throughout.
		touch := func(id string, to time.Time) {
			t.Helper()
			require.NoError(t, b.Driver.WithinTx(t.Context(), func(ctx context.Context, tx TTx) error {
				op, err := b.Driver.GetOperation(ctx, tx, id, true)
				if err != nil {
					return err
				}
				op.UpdatedAt = to
				return b.Driver.UpdateOperation(ctx, tx, &op)
			}))
		}
		seen := map[string]int{}
		var order []string
		batch := 0
		require.NoError(t, b.Driver.EachOperation(t.Context(), sagadriver.OperationFilter{Status: sagadriver.StatusRunning}, 4,
			func(ops []sagadriver.Operation) error {
				for _, op := range ops {
					seen[op.ID]++
					order = append(order, op.ID)
				}
				batch++
				touch(all[min(batch*4+3, len(all)-1)], at(100+batch))  // ahead, to the newest
				touch(all[min(batch*4+5, len(all)-1)], at(-100-batch)) // ahead, to the oldest
				touch(ops[0].ID, at(200+batch))                        // behind, to the newest
				touch(ops[len(ops)-1].ID, at(-200-batch))              // behind, to the oldest
				return nil
			}))
		for id, n := range seen {
			require.Equal(t, 1, n, "%s seen once", id)
		}
		require.Equal(t, all, order, "none skipped, in order of ID")
	})
}
