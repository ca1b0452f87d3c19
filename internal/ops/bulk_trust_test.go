package ops_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
)

// failDeletes makes every delete of the key records ids fail in the
// database itself, as a constraint or a fault would: a trigger of the
// test's own database. The returned func removes it.
func failDeletes(t *testing.T, b bundle, ids ...int64) func() {
	t.Helper()
	list := make([]string, len(ids))
	for i, id := range ids {
		list[i] = strconv.FormatInt(id, 10)
	}
	in := strings.Join(list, ", ")
	switch b.dialect {
	case "postgres":
		b.exec(t, `CREATE FUNCTION unstuck_test_fail() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'provider ledger locked for record %', OLD.id; END $$`)
		b.exec(t, `CREATE TRIGGER unstuck_test_fail BEFORE DELETE ON unstuck_idem_record FOR EACH ROW
WHEN (OLD.id IN (`+in+`)) EXECUTE FUNCTION unstuck_test_fail()`)
		return func() {
			b.exec(t, `DROP TRIGGER unstuck_test_fail ON unstuck_idem_record`)
			b.exec(t, `DROP FUNCTION unstuck_test_fail()`)
		}
	case "mysql":
		b.exec(t, `CREATE TRIGGER unstuck_test_fail BEFORE DELETE ON unstuck_idem_record FOR EACH ROW
BEGIN IF OLD.id IN (`+in+`) THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'provider ledger locked'; END IF; END`)
		return func() { b.exec(t, `DROP TRIGGER unstuck_test_fail`) }
	default:
		b.exec(t, `CREATE TRIGGER unstuck_test_fail BEFORE DELETE ON unstuck_idem_record WHEN OLD.id IN (`+in+`)
BEGIN SELECT RAISE(ABORT, 'provider ledger locked'); END`)
		return func() { b.exec(t, `DROP TRIGGER unstuck_test_fail`) }
	}
}

// itemIDs returns the record IDs of request id's items, in run order.
func itemIDs(t *testing.T, bulks bulkDecisions, id int64) []int64 {
	t.Helper()
	items, err := bulks.Items(context.Background(), id, "", 0, 10000)
	require.NoError(t, err)
	out := make([]int64, len(items))
	for i, it := range items {
		n, err := strconv.ParseInt(it.TargetID, 10, 64)
		require.NoError(t, err)
		out[i] = n
	}
	return out
}

// TestBulkCanaryPausesAndResumes covers SPEC K23 on every database: the
// run starts with a canary batch; a failure in it (injected in the
// database) pauses the run by itself, audited as the system's; only the
// requester or an admin resumes it; the rest then runs to the end.
func TestBulkCanaryPausesAndResumes(t *testing.T) {
	t.Parallel()
	for name, backend := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setup(t, backend)
			bulks, err := b.newBulks(b.records, ops.BulkConfig{Approval: ops.Approval{}, Batch: 10})
			require.NoError(t, err)
			const n = 40
			for i := range n {
				pending(t, b, fmt.Sprintf("canary-%02d", i))
			}
			req, _, err := bulks.Request(ctx, alice, forgetSpec("tenant:ops"), "provider outage, keys safe to rerun", n)
			require.NoError(t, err)
			require.Equal(t, ops.DefaultCanaryMin, req.Canary, "1 % of 40 is less than the least canary, 5")
			ids := itemIDs(t, bulks, req.ID)
			restore := failDeletes(t, b, ids[2])

			done, err := bulks.Run(ctx, req.ID, 0)
			require.NoError(t, err)
			require.True(t, done, "the run stopped: paused")
			got, _, err := bulks.Get(ctx, req.ID)
			require.NoError(t, err)
			require.Equal(t, store.BulkPaused, got.Status)
			require.Equal(t, map[string]int64{store.ItemApplied: 4, store.ItemFailed: 1, store.ItemPending: n - 5}, got.Counts,
				"only the canary batch ran")
			require.Equal(t, "system", got.PausedBy)
			require.Contains(t, got.PausedReason, "1 of 5 items of the canary batch failed")
			failed, err := bulks.Items(ctx, req.ID, store.ItemFailed, 0, 10)
			require.NoError(t, err)
			require.Len(t, failed, 1)
			require.Contains(t, failed[0].Detail, "provider ledger locked", "the database's error is the item's reason")
			var paused bool
			for _, e := range bulkEntries(t, b, req.ID) {
				paused = paused || e.Action == "bulk.pause" && e.Actor == "system"
			}
			require.True(t, paused, "the automatic pause is audited")

			done, err = bulks.Run(ctx, req.ID, 0)
			require.NoError(t, err)
			require.True(t, done, "a paused request does not run")
			_, err = bulks.Resume(ctx, carol, req.ID, false)
			require.ErrorIs(t, err, ops.ErrForbidden, "neither the requester nor an admin")
			restore()
			_, err = bulks.Resume(ctx, bob, req.ID, true)
			require.NoError(t, err)
			_, err = bulks.Resume(ctx, bob, req.ID, true)
			require.ErrorIs(t, err, ops.ErrNotWaiting, "already running")
			done, err = bulks.Run(ctx, req.ID, 0)
			require.NoError(t, err)
			require.True(t, done)
			got, _, err = bulks.Get(ctx, req.ID)
			require.NoError(t, err)
			require.Equal(t, store.BulkDone, got.Status)
			require.Equal(t, map[string]int64{store.ItemApplied: n - 1, store.ItemFailed: 1}, got.Counts)
			require.Empty(t, got.PausedReason, "a resume clears the pause")
			require.False(t, got.FirstDecided.IsZero())
			require.False(t, got.LastDecided.Before(got.FirstDecided), "the report's duration")

			// A person pauses: the run stops before its next item.
			for i := range 12 {
				pending(t, b, fmt.Sprintf("pause-%02d", i))
			}
			// The 12 and the one that failed before.
			req, _, err = bulks.Request(ctx, alice, forgetSpec("tenant:ops"), "provider outage, keys safe to rerun", 13)
			require.NoError(t, err)
			_, err = bulks.Pause(ctx, carol, req.ID, false)
			require.ErrorIs(t, err, ops.ErrForbidden)
			_, err = bulks.Pause(ctx, alice, req.ID, false)
			require.NoError(t, err)
			done, err = bulks.Run(ctx, req.ID, 0)
			require.NoError(t, err)
			require.True(t, done)
			got, _, err = bulks.Get(ctx, req.ID)
			require.NoError(t, err)
			require.Equal(t, map[string]int64{store.ItemPending: 13}, got.Counts, "nothing decided while paused")
			require.Equal(t, "alice", got.PausedBy)
			_, err = bulks.Cancel(ctx, alice, req.ID, false)
			require.NoError(t, err, "a paused request can be cancelled")
		})
	}
}

// TestBulkPausesOnAFailureStreak: after a good canary, twenty failures in
// a row pause the run at once, mid-batch (SPEC K23).
func TestBulkPausesOnAFailureStreak(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, backends["SQLite"])
	bulks, err := b.newBulks(b.records, ops.BulkConfig{Approval: ops.Approval{}, Batch: 500,
		PauseRate: 0.99, PauseStreak: 20})
	require.NoError(t, err)
	const n = 60
	for i := range n {
		pending(t, b, fmt.Sprintf("streak-%02d", i))
	}
	req, _, err := bulks.Request(ctx, alice, forgetSpec("tenant:ops"), "provider outage, keys safe to rerun", n)
	require.NoError(t, err)
	ids := itemIDs(t, bulks, req.ID)
	failDeletes(t, b, ids[10:40]...)
	done, err := bulks.Run(ctx, req.ID, 0)
	require.NoError(t, err)
	require.True(t, done)
	got, _, err := bulks.Get(ctx, req.ID)
	require.NoError(t, err)
	require.Equal(t, store.BulkPaused, got.Status)
	require.Equal(t, map[string]int64{store.ItemApplied: 10, store.ItemFailed: 20, store.ItemPending: n - 30}, got.Counts,
		"paused at the twentieth failure in a row")
	require.Contains(t, got.PausedReason, "20 items in a row failed")
}

// TestBulkFrozenSet covers SPEC K22: what runs is the set the preview
// froze. A key that starts matching later is not in it (and is counted as
// a new match), one that changed is skipped, a request none of whose items
// can still run cannot be approved, and an item two requests hold is
// decided once: the later run names the request that decided it.
func TestBulkFrozenSet(t *testing.T) {
	t.Parallel()
	for name, backend := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setup(t, backend)
			bulks := newBulks(t, b, "bulk")
			recs := make([]idemdriver.Record, 6)
			for i := range recs {
				recs[i] = pending(t, b, fmt.Sprintf("frozen-%02d", i))
			}
			spec := forgetSpec("tenant:ops")
			draft, p, err := bulks.Freeze(ctx, alice, spec)
			require.NoError(t, err)
			require.Equal(t, store.BulkDraft, draft.Status)
			require.EqualValues(t, 6, draft.Total)
			require.Equal(t, []ops.BulkBreakdown{{By: "state", Counts: []ops.BulkCount{{Label: "pending", Count: 6}}},
				{By: "operation", Counts: []ops.BulkCount{{Label: idem.DefaultOperation, Count: 6}}},
				{By: "scope", Counts: []ops.BulkCount{{Label: "tenant:ops", Count: 6}}}}, p.Breakdown)
			sum := ops.ReadSummary(draft)
			require.Len(t, sum.Sample, 6)
			require.Equal(t, "outcome uncertain: timeout", sum.Sample[0].LastError, "the sample carries each item's last error")
			require.True(t, strings.HasPrefix(sum.Sample[0].ExternalRef, "prov-"), "and its external reference")
			list, err := bulks.List(ctx, "", 10)
			require.NoError(t, err)
			require.Empty(t, list, "a draft is no request yet")
			// A second preview of the same items, by the same person.
			otherDraft, _, err := bulks.Freeze(ctx, alice, spec)
			require.NoError(t, err)

			// Live traffic after the freeze: a new match, and a change.
			late := pending(t, b, "frozen-late")
			_, err = b.keys.Decide(ctx, carol, ops.KeyDecision{RecordID: recs[0].ID, Version: recs[0].Version,
				Action: idem.OperatorConfirmHappened, ExternalRef: "ch_0", Reason: "checked at the provider"})
			require.NoError(t, err)
			drift, atLeast, err := bulks.Drift(ctx, alice, draft, spec)
			require.NoError(t, err)
			require.False(t, atLeast)
			require.EqualValues(t, 1, drift, "one new match since the freeze")

			_, err = bulks.Submit(ctx, carol, draft.ID, "not my preview to submit", 6)
			require.ErrorIs(t, err, ops.ErrNotWaiting, "only the requester submits a draft")
			_, err = bulks.Submit(ctx, alice, draft.ID, "provider outage, keys safe to rerun", 7)
			var ce *ops.CountError
			require.ErrorAs(t, err, &ce)
			require.EqualValues(t, 6, ce.Now, "the frozen count, not the live one")
			req, err := bulks.Submit(ctx, alice, draft.ID, "provider outage, keys safe to rerun", 6)
			require.NoError(t, err)
			require.Equal(t, store.BulkWaitingApproval, req.Status)

			// The second request over the same items, run first.
			other, err := bulks.Submit(ctx, alice, otherDraft.ID, "the same outage, asked twice", 6)
			require.NoError(t, err)
			_, err = bulks.Approve(ctx, bob, other.ID, "")
			require.NoError(t, err)
			done, err := bulks.Run(ctx, other.ID, 0)
			require.NoError(t, err)
			require.True(t, done)

			_, err = bulks.Approve(ctx, bob, req.ID, "")
			require.ErrorIs(t, err, ops.ErrNothingToRun, "every item was decided meanwhile: nothing to approve")
			got, _, err := bulks.Get(ctx, req.ID)
			require.NoError(t, err)
			require.Equal(t, store.BulkWaitingApproval, got.Status, "still waiting: to be rejected")

			// Forced past the check (a race): the run skips every item.
			_, err = b.db.SetBulkStatus(ctx, req.ID, []string{store.BulkWaitingApproval}, store.BulkRunning, "bob", "race")
			require.NoError(t, err)
			done, err = bulks.Run(ctx, req.ID, 0)
			require.NoError(t, err)
			require.True(t, done)
			skipped, err := bulks.Items(ctx, req.ID, store.ItemSkipped, 0, 10)
			require.NoError(t, err)
			require.Len(t, skipped, 6)
			var byOther int
			for _, it := range skipped {
				if it.Detail == "decided by request "+strconv.FormatInt(other.ID, 10) {
					byOther++
				}
			}
			require.Equal(t, 5, byOther, "the five the other request forgot name it; the one confirmed meanwhile is changed")
			_, ok, err := b.records.KeyByID(ctx, late.ID)
			require.NoError(t, err)
			require.True(t, ok, "the key that matched after the freeze is in neither set")

			// A draft never submitted is dropped after an hour.
			stale, _, err := bulks.Freeze(ctx, carol, spec)
			require.NoError(t, err)
			require.NotZero(t, stale.ID)
			bulks.SetNow(func() time.Time { return time.Now().Add(ops.DefaultDraftExpiry + time.Minute) })
			_, err = bulks.List(ctx, "", 10)
			require.NoError(t, err)
			_, ok, err = b.db.BulkByID(ctx, stale.ID)
			require.NoError(t, err)
			require.False(t, ok, "the expired draft is gone")
			items, err := b.db.BulkItems(ctx, stale.ID, "", 0, 10)
			require.NoError(t, err)
			require.Empty(t, items, "with its items")
		})
	}
}

// blockingKeys is the engine's key listing, held at its first page until
// release is closed: a preview that takes its time.
type blockingKeys struct {
	idemdriver.Admin
	started chan struct{}
	release chan struct{}
}

func (k *blockingKeys) EachKey(ctx context.Context, f idemdriver.KeyFilter, batch int, fn func([]idemdriver.Record) error) error {
	return k.Admin.EachKey(ctx, f, batch, func(recs []idemdriver.Record) error {
		k.started <- struct{}{}
		select {
		case <-k.release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return fn(recs)
	})
}

// TestBulkPreviewIsBounded: a person runs at most two previews at once,
// a preview past its time bound asks for a narrower filter instead of
// freezing part of the set, and one whose client went away stops.
func TestBulkPreviewIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, backends["SQLite"])
	for i := range 3 {
		pending(t, b, fmt.Sprintf("bounded-%02d", i))
	}
	slow := &blockingKeys{Admin: b.records, started: make(chan struct{}, 4), release: make(chan struct{})}
	bulks, err := b.newBulks(slow, ops.BulkConfig{Approval: ops.Approval{}, PreviewTimeout: time.Minute})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range ops.MaxPreviewsPerUser {
		wg.Go(func() {
			_, p, err := bulks.Freeze(ctx, alice, forgetSpec("tenant:ops"))
			require.NoError(t, err)
			require.EqualValues(t, 3, p.Legal)
		})
	}
	for range ops.MaxPreviewsPerUser {
		<-slow.started
	}
	_, _, err = bulks.Freeze(ctx, alice, forgetSpec("tenant:ops"))
	require.ErrorIs(t, err, ops.ErrTooManyPreviews, "a third preview of the same person")
	close(slow.release)
	wg.Wait()
	_, _, err = bulks.Freeze(ctx, alice, forgetSpec("tenant:ops"))
	require.NoError(t, err, "the previews ended: room again")

	held := &blockingKeys{Admin: b.records, started: make(chan struct{}, 4), release: make(chan struct{})}
	timed, err := b.newBulks(held, ops.BulkConfig{Approval: ops.Approval{}, PreviewTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	_, _, err = timed.Freeze(ctx, alice, forgetSpec("tenant:ops"))
	var slowErr *ops.PreviewTooSlowError
	require.ErrorAs(t, err, &slowErr, "past its time bound")
	require.ErrorIs(t, err, ops.ErrPreviewTooSlow)
	// With a time bound far away, only the client going away ends it.
	waiting := &blockingKeys{Admin: b.records, started: make(chan struct{}, 4), release: make(chan struct{})}
	patient, err := b.newBulks(waiting, ops.BulkConfig{Approval: ops.Approval{}, PreviewTimeout: time.Hour})
	require.NoError(t, err)
	gone, cancel := context.WithCancel(ctx)
	go func() {
		<-waiting.started
		cancel()
	}()
	_, _, err = patient.Freeze(gone, bob, forgetSpec("tenant:ops"))
	require.ErrorIs(t, err, context.Canceled, "the client went away")
	list, err := b.db.ListBulk(ctx, store.BulkDraft, 10)
	require.NoError(t, err)
	require.Len(t, list, 3, "only the finished previews froze a set")
}
