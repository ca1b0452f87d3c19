package ops_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/fielderr"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
)

// bulkEntries reads every audit entry of bulk request id: the request's
// own and its items' (RequestID bulk-id), oldest first.
func bulkEntries(t *testing.T, b bundle, id int64) []audit.Entry {
	t.Helper()
	var out []audit.Entry
	var after int64
	for {
		page, next, err := b.trail.List(context.Background(), audit.Filter{After: after, Limit: audit.MaxLimit})
		require.NoError(t, err)
		for _, e := range page {
			if e.RequestID == ops.BulkRequestID(id) {
				out = append(out, e)
			}
		}
		if next == 0 {
			return out
		}
		after = next
	}
}

func newBulks(t *testing.T, b bundle, approval string) bulkDecisions {
	t.Helper()
	a, err := ops.ParseApproval(approval)
	require.NoError(t, err)
	bulks, err := b.newBulks(b.records, ops.BulkConfig{Approval: a, Batch: 7})
	require.NoError(t, err)
	return bulks
}

var (
	alice = ops.Actor{Username: "alice", Role: "oncall"}
	bob   = ops.Actor{Username: "bob", Role: "admin"}
	carol = ops.Actor{Username: "carol", Role: "support"}
)

func forgetSpec(scope string) ops.BulkSpec {
	return ops.BulkSpec{Kind: ops.BulkKeys, Action: "forget", KeyFilter: idemdriver.KeyFilter{Scope: scope}, FilterQuery: "scope=" + scope, IncludeMayHaveHappened: true}
}

// TestBulkK12 covers SPEC K12 on both databases: the exact count, typed
// confirmation, a stale item skipped and never forced, and each item
// decided exactly once by overlapping runs, with one entry per item
// pointing at the request.
func TestBulkK12(t *testing.T) {
	t.Parallel()
	for name, backend := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setup(t, backend)
			bulks := newBulks(t, b, "none")
			const n = 30
			recs := make([]idemdriver.Record, n)
			for i := range recs {
				recs[i] = pending(t, b, fmt.Sprintf("bulk-%02d", i))
			}

			_, err := bulks.Preview(ctx, ops.BulkSpec{Kind: ops.BulkKeys, Action: "forget"})
			var fe *fielderr.Error
			require.ErrorAs(t, err, &fe, "an empty filter needs all")
			require.Equal(t, "all", fe.Field)

			p, err := bulks.Preview(ctx, forgetSpec("tenant:ops"))
			require.NoError(t, err)
			require.EqualValues(t, n, p.Legal)
			require.Len(t, p.Sample, ops.SampleSize)

			_, _, err = bulks.Request(ctx, alice, forgetSpec("tenant:ops"), "provider outage, keys safe to rerun", n-1)
			var ce *ops.CountError
			require.ErrorAs(t, err, &ce, "a typed count that is not the count now is refused")
			require.EqualValues(t, n, ce.Now)

			req, _, err := bulks.Request(ctx, alice, forgetSpec("tenant:ops"), "provider outage, keys safe to rerun", n)
			require.NoError(t, err)
			require.Equal(t, store.BulkRunning, req.Status, "no approval configured")

			// One item changes after the request: it must be skipped.
			_, err = b.keys.Decide(ctx, carol, ops.KeyDecision{RecordID: recs[3].ID, Version: recs[3].Version,
				Action: idem.OperatorConfirmHappened, ExternalRef: "ch_3", Reason: "checked at the provider"})
			require.NoError(t, err)

			// Three overlapping runs: a crashed run's job rescued beside
			// its resumption.
			var wg sync.WaitGroup
			errs := make([]error, 3)
			for i := range errs {
				wg.Go(func() {
					for {
						done, err := bulks.Run(ctx, req.ID, 0)
						if err != nil || done {
							errs[i] = err
							return
						}
					}
				})
			}
			wg.Wait()
			for _, err := range errs {
				require.NoError(t, err)
			}
			got, ok, err := bulks.Get(ctx, req.ID)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, store.BulkDone, got.Status)
			require.Equal(t, map[string]int64{store.ItemApplied: n - 1, store.ItemSkipped: 1}, got.Counts)

			skipped, err := bulks.Items(ctx, req.ID, store.ItemSkipped, 0, 100)
			require.NoError(t, err)
			require.Len(t, skipped, 1)
			require.Equal(t, strconv.FormatInt(recs[3].ID, 10), skipped[0].TargetID)
			kept, ok, err := b.records.KeyByID(ctx, recs[3].ID)
			require.NoError(t, err)
			require.True(t, ok, "the stale item was not forced")
			require.Equal(t, idemdriver.StatusCompleted, kept.Status)

			perTarget := map[string]int{}
			var requests, conflicts int
			for _, e := range bulkEntries(t, b, req.ID) {
				switch {
				case e.Action == "bulk.request":
					requests++
				case e.Action == "key.forget" && e.Outcome == audit.OutcomeApplied:
					perTarget[e.TargetID]++
				case e.Outcome == audit.OutcomeConflict:
					conflicts++
				default:
					t.Fatalf("unexpected entry %+v", e)
				}
			}
			require.Equal(t, 1, requests)
			require.Equal(t, 1, conflicts)
			require.Len(t, perTarget, n-1)
			for id, c := range perTarget {
				require.Equal(t, 1, c, "item %s decided once", id)
			}
		})
	}
}

// TestBulkApprovalK13 covers SPEC K13: the request waits, its requester
// cannot approve it (an audited denial), a second person can, expiry and
// cancel.
func TestBulkApprovalK13(t *testing.T) {
	t.Parallel()
	for name, backend := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setup(t, backend)
			bulks := newBulks(t, b, "")
			for i := range 5 {
				pending(t, b, fmt.Sprintf("appr-%d", i))
			}
			req, _, err := bulks.Request(ctx, alice, forgetSpec("tenant:ops"), "provider outage, keys safe to rerun", 5)
			require.NoError(t, err)
			require.Equal(t, store.BulkWaitingApproval, req.Status)
			n, err := bulks.Waiting(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 1, n)

			done, err := bulks.Run(ctx, req.ID, 0)
			require.NoError(t, err)
			require.True(t, done, "nothing runs before approval")
			got, _, err := bulks.Get(ctx, req.ID)
			require.NoError(t, err)
			require.Equal(t, map[string]int64{store.ItemPending: 5}, got.Counts)

			_, err = bulks.Approve(ctx, alice, req.ID, "")
			require.ErrorIs(t, err, ops.ErrSelfApproval)
			_, err = bulks.Reject(ctx, alice, req.ID, "changed my mind entirely")
			require.ErrorIs(t, err, ops.ErrSelfApproval)
			denied, _, err := b.trail.List(ctx, audit.Filter{Outcome: audit.OutcomeDenied, Actor: "alice"})
			require.NoError(t, err)
			require.Len(t, denied, 2)

			_, err = bulks.Reject(ctx, bob, req.ID, "short")
			var fe *fielderr.Error
			require.ErrorAs(t, err, &fe, "a rejection needs a reason")

			_, err = bulks.Approve(ctx, bob, req.ID, "checked with the provider")
			require.NoError(t, err)
			_, err = bulks.Approve(ctx, bob, req.ID, "")
			require.ErrorIs(t, err, ops.ErrNotWaiting)
			done, err = bulks.Run(ctx, req.ID, 0)
			require.NoError(t, err)
			require.True(t, done)
			got, _, err = bulks.Get(ctx, req.ID)
			require.NoError(t, err)
			require.Equal(t, store.BulkDone, got.Status)
			require.Equal(t, "bob", got.DecidedBy)
			require.Equal(t, map[string]int64{store.ItemApplied: 5}, got.Counts)
			for _, e := range bulkEntries(t, b, req.ID) {
				if e.Action == "key.forget" {
					require.Contains(t, e.Reason, "approved by bob")
				}
			}

			t.Run("Expiry", func(t *testing.T) {
				pending(t, b, "appr-exp")
				req, _, err := bulks.Request(ctx, alice, forgetSpec("tenant:ops"), "provider outage, keys safe to rerun", 1)
				require.NoError(t, err)
				bulks.SetNow(func() time.Time { return time.Now().Add(25 * time.Hour) })
				defer bulks.SetNow(time.Now)
				_, err = bulks.Approve(ctx, bob, req.ID, "")
				require.ErrorIs(t, err, ops.ErrNotWaiting)
				got, _, err := bulks.Get(ctx, req.ID)
				require.NoError(t, err)
				require.Equal(t, store.BulkExpired, got.Status)
			})

			t.Run("Cancel", func(t *testing.T) {
				pending(t, b, "appr-cancel") // beside the expired request's item
				req, _, err := bulks.Request(ctx, alice, forgetSpec("tenant:ops"), "provider outage, keys safe to rerun", 2)
				require.NoError(t, err)
				_, err = bulks.Cancel(ctx, carol, req.ID, false)
				require.ErrorIs(t, err, ops.ErrForbidden)
				_, err = bulks.Cancel(ctx, alice, req.ID, false)
				require.NoError(t, err)
				_, err = bulks.Approve(ctx, bob, req.ID, "")
				require.ErrorIs(t, err, ops.ErrNotWaiting)
				got, _, err := bulks.Get(ctx, req.ID)
				require.NoError(t, err)
				require.Equal(t, store.BulkCancelled, got.Status)
				require.Equal(t, map[string]int64{store.ItemPending: 2}, got.Counts)
			})
		})
	}
}

// TestBulkCancelMidway: a cancel in the middle of a run stops it within a
// batch; the items decided stay decided, the others stay as they were,
// and the counts, the records and the trail agree (SPEC K12).
func TestBulkCancelMidway(t *testing.T) {
	t.Parallel()
	for name, backend := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setup(t, backend)
			bulks, err := b.newBulks(b.records, ops.BulkConfig{Approval: ops.Approval{}, Batch: 5, Pause: 300 * time.Millisecond})
			require.NoError(t, err)
			const n = 40
			for i := range n {
				pending(t, b, fmt.Sprintf("cancel-%02d", i))
			}
			req, _, err := bulks.Request(ctx, alice, forgetSpec("tenant:ops"), "provider outage, keys safe to rerun", n)
			require.NoError(t, err)
			ran := make(chan error, 1)
			go func() {
				_, err := bulks.Run(ctx, req.ID, 0)
				ran <- err
			}()
			for {
				got, _, err := bulks.Get(ctx, req.ID)
				require.NoError(t, err)
				if got.Counts[store.ItemApplied] >= 5 {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			_, err = bulks.Cancel(ctx, alice, req.ID, false)
			require.NoError(t, err)
			require.NoError(t, <-ran)
			got, _, err := bulks.Get(ctx, req.ID)
			require.NoError(t, err)
			require.Equal(t, store.BulkCancelled, got.Status)
			applied := got.Counts[store.ItemApplied]
			require.Less(t, applied, int64(n), "stopped in the middle")
			require.Equal(t, map[string]int64{store.ItemApplied: applied, store.ItemPending: n - applied}, got.Counts)
			left, err := b.records.ListKeys(ctx, idemdriver.KeyFilter{Scope: "tenant:ops", Limit: 100})
			require.NoError(t, err)
			require.Len(t, left.Records, int(n-applied), "the undecided records are untouched")
			var decided int64
			for _, e := range bulkEntries(t, b, req.ID) {
				if e.Action == "key.forget" {
					decided++
				}
			}
			require.Equal(t, applied, decided, "one entry per decided item")
			done, err := bulks.Run(ctx, req.ID, 0)
			require.NoError(t, err)
			require.True(t, done, "a cancelled request does not run again")
		})
	}
}
