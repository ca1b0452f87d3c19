package sagatest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// runRecords checks the write contract: what the step machine stores and
// reads back in its transactions.
func runRecords[TTx any](t *testing.T, newFixture func(t *testing.T) Fixture[TTx]) {
	t.Run("InsertGet", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFixture)
		op := newOp(opOpts{Status: sagadriver.StatusReviewRequired, CorrelationID: "order-1", ExternalID: "acc-9"})
		op.Resolution = "checked by hand"
		b.write(t, op, nil, nil)
		got, err := b.get(t, op.ID)
		require.NoError(t, err)
		require.Equal(t, normalized(t, op, got), got, "every field, steps in order")

		none := newOp(opOpts{Status: sagadriver.StatusPending})
		none.Steps[0].Result, none.Input = nil, json.RawMessage(`{}`)
		b.write(t, none, nil, nil)
		got, err = b.get(t, none.ID)
		require.NoError(t, err)
		require.Nil(t, got.Steps[0].Result, "a NULL result stays nil")
		require.Nil(t, got.FinishedAt)

		_, err = b.get(t, "no-such-operation")
		require.ErrorIs(t, err, sagadriver.ErrNotFound)
	})

	t.Run("ErrExists", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFixture)
		op := b.op(t, opOpts{ID: "op-taken"})
		again := newOp(opOpts{ID: op.ID, Type: "refund"})
		err := b.Driver.WithinTx(t.Context(), func(ctx context.Context, tx TTx) error {
			return b.Driver.InsertOperation(ctx, tx, &again)
		})
		require.ErrorIs(t, err, sagadriver.ErrExists)
		got, err := b.get(t, op.ID)
		require.NoError(t, err)
		require.Equal(t, "signup", got.Type, "the first stays")
	})

	t.Run("WithinTxRollsBack", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFixture)
		boom := errors.New("boom")
		op := newOp(opOpts{})
		err := b.Driver.WithinTx(t.Context(), func(ctx context.Context, tx TTx) error {
			if err := b.Driver.InsertOperation(ctx, tx, &op); err != nil {
				return err
			}
			return boom
		})
		require.ErrorIs(t, err, boom)
		_, err = b.get(t, op.ID)
		require.ErrorIs(t, err, sagadriver.ErrNotFound, "nothing of a failed transaction stays")
	})

	t.Run("UpdateWithVersion", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFixture)
		op := b.op(t, opOpts{})
		later := at(5)
		err := b.Driver.WithinTx(t.Context(), func(ctx context.Context, tx TTx) error {
			cur, err := b.Driver.GetOperation(ctx, tx, op.ID, true)
			if err != nil {
				return err
			}
			cur.Status, cur.CurrentStep, cur.LastError, cur.ReviewReason, cur.Resolution = sagadriver.StatusCompleted, "", "", "", "done"
			cur.UpdatedAt, cur.FinishedAt = later, &later
			st := &cur.Steps[1]
			st.Status, st.ExternalID, st.Result, st.Attempts, st.Verifications = sagadriver.StepCompleted, "ws-1", json.RawMessage(`{"id":"ws-1"}`), 3, 2
			st.LastError, st.LastErrorClass, st.CompStatus, st.CompAttempts, st.CompError = "", "", sagadriver.CompPending, 1, "x"
			st.Generation, st.FinishedAt, st.UpdatedAt = 7, &later, later
			if err := b.Driver.UpdateOperation(ctx, tx, &cur); err != nil {
				return err
			}
			require.Equal(t, op.Version+1, cur.Version, "the version moves on")
			op = cur
			return nil
		})
		require.NoError(t, err)
		got, err := b.get(t, op.ID)
		require.NoError(t, err)
		require.Equal(t, normalized(t, op, got), got, "every written field")

		stale := got
		stale.Steps = append([]sagadriver.StepRecord(nil), got.Steps...)
		stale.Version--
		stale.Status = sagadriver.StatusFailed
		stale.Steps[0].Status = sagadriver.StepFailed
		err = b.Driver.WithinTx(t.Context(), func(ctx context.Context, tx TTx) error {
			return b.Driver.UpdateOperation(ctx, tx, &stale)
		})
		require.ErrorIs(t, err, sagadriver.ErrStale)
		again, err := b.get(t, op.ID)
		require.NoError(t, err)
		require.Equal(t, got, again, "a stale write writes nothing, not even a step")
	})

	t.Run("Events", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFixture)
		op := b.op(t, opOpts{Events: 3})
		other := b.op(t, opOpts{Events: 1})
		var evs, otherEvs []sagadriver.Event
		require.NoError(t, b.Driver.WithinTx(t.Context(), func(ctx context.Context, tx TTx) error {
			if err := b.Driver.InsertEvents(ctx, tx, []sagadriver.Event{{OperationID: op.ID, Action: "status", From: "running",
				To: "review_required", Actor: "operator:ann", Message: "by hand", At: at(9)}}); err != nil {
				return err
			}
			var err error
			if evs, err = b.Driver.ListEvents(ctx, tx, op.ID); err != nil {
				return err
			}
			otherEvs, err = b.Driver.ListEvents(ctx, tx, other.ID)
			return err
		}))
		require.Len(t, evs, 5)
		require.Len(t, otherEvs, 2)
		for i, e := range evs {
			require.Equal(t, op.ID, e.OperationID)
			if i > 0 {
				require.Greater(t, e.ID, evs[i-1].ID, "in order of insertion")
			}
		}
		require.Equal(t, "started", evs[0].Action)
		require.Equal(t, 3, evs[3].Attempt)
		require.Equal(t, "workspace", evs[3].Step)
		require.Equal(t, sagadriver.Event{ID: evs[4].ID, OperationID: op.ID, Action: "status", From: "running", To: "review_required",
			Actor: "operator:ann", Message: "by hand", At: at(9)}, evs[4])
	})

	t.Run("Findings", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFixture)
		op := b.op(t, opOpts{Status: sagadriver.StatusCompleted})
		other := b.op(t, opOpts{Status: sagadriver.StatusCompleted})
		insert := func(f sagadriver.Finding) (sagadriver.Finding, bool) {
			t.Helper()
			var ok bool
			require.NoError(t, b.Driver.WithinTx(t.Context(), func(ctx context.Context, tx TTx) error {
				var err error
				ok, err = b.Driver.InsertFinding(ctx, tx, &f)
				return err
			}))
			return f, ok
		}
		list := func(id string, open bool) []sagadriver.Finding {
			t.Helper()
			var fs []sagadriver.Finding
			require.NoError(t, b.Driver.WithinTx(t.Context(), func(ctx context.Context, tx TTx) error {
				var err error
				fs, err = b.Driver.ListFindings(ctx, tx, id, open)
				return err
			}))
			return fs
		}
		orphan := sagadriver.Finding{OperationID: op.ID, Step: "workspace", Kind: sagadriver.FindingOrphanExternal, ExternalID: "ws-9",
			Detail: "the provider has a workspace we do not record", DetectedAt: at(1), Fingerprint: "orphan workspace ws-9"}
		first, ok := insert(orphan)
		require.True(t, ok)
		require.NotZero(t, first.ID)
		_, ok = insert(orphan)
		require.False(t, ok, "one open finding of a kind per step")
		missing, ok := insert(sagadriver.Finding{OperationID: op.ID, Step: "account", Kind: sagadriver.FindingMissingExternal,
			Detail: "gone", DetectedAt: at(2)})
		require.True(t, ok, "another step or kind is another finding")
		theirs, ok := insert(sagadriver.Finding{OperationID: other.ID, Kind: sagadriver.FindingUnresolved, Detail: "stuck", DetectedAt: at(3)})
		require.True(t, ok)
		require.Equal(t, []sagadriver.Finding{first, missing}, list(op.ID, false))
		require.Equal(t, []sagadriver.Finding{first, missing, theirs}, list("", true), `"" lists every operation's`)

		var n int
		require.NoError(t, b.Driver.WithinTx(t.Context(), func(ctx context.Context, tx TTx) error {
			var err error
			n, err = b.Driver.ResolveFindings(ctx, tx, op.ID, at(4), "operator:ann")
			return err
		}))
		require.Equal(t, 2, n)
		require.Equal(t, []sagadriver.Finding{theirs}, list("", true), "only the other operation's stay open")
		all := list(op.ID, false)
		require.Len(t, all, 2)
		for _, f := range all {
			require.NotNil(t, f.ResolvedAt)
			require.Equal(t, at(4), *f.ResolvedAt)
			require.Equal(t, "operator:ann", f.ResolvedBy)
		}
		require.Equal(t, "orphan workspace ws-9", all[0].Fingerprint)

		again := orphan
		again.Supersedes, again.Detail, again.DetectedAt = first.ID, "the workspace changed", at(5)
		reopened, ok := insert(again)
		require.True(t, ok, "a resolved finding does not block a new one")
		got := list(op.ID, true)
		require.Equal(t, []sagadriver.Finding{reopened}, got)
		require.Equal(t, first.ID, got[0].Supersedes)
	})

	t.Run("Import", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFixture)
		imp, ok := b.Driver.(sagadriver.Importer)
		if !ok {
			t.Skip("the driver implements no sagadriver.Importer")
		}
		done := newOp(opOpts{Status: sagadriver.StatusCompleted, At: at(2), CorrelationID: "order-3", ExternalID: "acc-3"})
		review := newOp(opOpts{Status: sagadriver.StatusReviewRequired, At: at(1)})
		review.Steps[1].Result = nil
		resolved := at(3)
		events := []sagadriver.Event{
			{OperationID: done.ID, Action: "started", To: "pending", Actor: "app", At: at(0)},
			{OperationID: done.ID, Step: "account", Action: "step_completed", From: "running", To: "completed", Actor: "worker", Attempt: 1, At: at(1)},
			{OperationID: review.ID, Action: "status", From: "running", To: "review_required", Actor: "worker", Message: "stuck", At: at(1)},
		}
		findings := []sagadriver.Finding{
			{OperationID: review.ID, Step: "workspace", Kind: sagadriver.FindingUnresolved, Detail: "uncertain", DetectedAt: at(1),
				Fingerprint: "unresolved workspace"},
			{OperationID: done.ID, Kind: sagadriver.FindingMissingExternal, Detail: "gone", DetectedAt: at(2), ResolvedAt: &resolved,
				ResolvedBy: "operator:ann"},
		}
		require.NoError(t, imp.ImportOperations(t.Context(), []sagadriver.Operation{done, review}, events, findings))

		det, err := b.Driver.ReadOperation(t.Context(), done.ID, 0)
		require.NoError(t, err)
		require.Equal(t, normalized(t, done, det.Operation), det.Operation, "as given")
		require.Len(t, det.Events, 2)
		require.Equal(t, "step_completed", det.Events[1].Action)
		require.Equal(t, at(1), det.Events[1].At)
		require.Len(t, det.Findings, 1)
		require.Equal(t, "operator:ann", det.Findings[0].ResolvedBy)
		require.Equal(t, resolved, *det.Findings[0].ResolvedAt)
		det, err = b.Driver.ReadOperation(t.Context(), review.ID, 0)
		require.NoError(t, err)
		require.Equal(t, normalized(t, review, det.Operation), det.Operation)
		require.Len(t, det.Findings, 1)
		require.Equal(t, "unresolved workspace", det.Findings[0].Fingerprint)
		require.Nil(t, det.Findings[0].ResolvedAt)

		fresh := newOp(opOpts{})
		err = imp.ImportOperations(t.Context(), []sagadriver.Operation{fresh, done}, nil, nil)
		require.ErrorIs(t, err, sagadriver.ErrExists)
		_, err = b.get(t, fresh.ID)
		require.ErrorIs(t, err, sagadriver.ErrNotFound, "a failed import inserts nothing")
	})

	t.Run("ListOperations", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFixture)
		running := b.op(t, opOpts{At: at(1)})
		pending := b.op(t, opOpts{Status: sagadriver.StatusPending, At: at(2)})
		done := b.op(t, opOpts{Status: sagadriver.StatusCompleted, At: at(3)})
		failed := b.op(t, opOpts{Status: sagadriver.StatusFailed, At: at(4)})
		list := func(p sagadriver.ListParams) []string {
			t.Helper()
			var ops []sagadriver.Operation
			require.NoError(t, b.Driver.WithinTx(t.Context(), func(ctx context.Context, tx TTx) error {
				var err error
				ops, err = b.Driver.ListOperations(ctx, tx, p)
				return err
			}))
			for _, op := range ops {
				require.Len(t, op.Steps, 2, "with steps")
			}
			return ids(ops)
		}
		require.Equal(t, ids([]sagadriver.Operation{running, pending, done, failed}), list(sagadriver.ListParams{}), "oldest update first")
		require.Equal(t, []string{running.ID, pending.ID},
			list(sagadriver.ListParams{Statuses: []sagadriver.Status{sagadriver.StatusPending, sagadriver.StatusRunning}}))
		require.Equal(t, []string{running.ID, pending.ID}, list(sagadriver.ListParams{UpdatedBefore: at(3)}))
		require.Equal(t, []string{failed.ID}, list(sagadriver.ListParams{FinishedAfter: at(3)}))
		require.Equal(t, []string{running.ID}, list(sagadriver.ListParams{Limit: 1}))
	})

	t.Run("StatsAndNow", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newFixture)
		b.op(t, opOpts{At: at(3)})
		b.op(t, opOpts{At: at(1)})
		review := newOp(opOpts{Status: sagadriver.StatusReviewRequired, At: at(2)})
		review.Steps[0].Status = sagadriver.StepCompensationFailed
		b.write(t, review, nil, []sagadriver.Finding{{OperationID: review.ID, Kind: sagadriver.FindingUnresolved, Detail: "x", DetectedAt: at(2)}})
		var (
			st  sagadriver.Stats
			now time.Time
		)
		require.NoError(t, b.Driver.WithinTx(t.Context(), func(ctx context.Context, tx TTx) error {
			var err error
			if now, err = b.Driver.Now(ctx, tx); err != nil {
				return err
			}
			st, err = b.Driver.Stats(ctx, tx)
			return err
		}))
		require.WithinDuration(t, time.Now(), now, 5*time.Second)
		require.Equal(t, now.Truncate(time.Microsecond), now, "microseconds")
		require.Equal(t, time.UTC, now.Location())
		require.Equal(t, map[sagadriver.Status]int{sagadriver.StatusRunning: 2, sagadriver.StatusReviewRequired: 1}, st.Operations)
		require.Equal(t, map[sagadriver.Status]time.Time{sagadriver.StatusRunning: at(1), sagadriver.StatusReviewRequired: at(2)}, st.OldestUpdate)
		require.Equal(t, 1, st.FailedCompensations)
		require.Equal(t, 1, st.OpenFindings)
		require.Equal(t, at(2), st.OldestOpenFinding, "when the oldest open finding was detected")
	})
}
