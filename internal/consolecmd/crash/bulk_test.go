package crash

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/consolecmd"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/unstucktest/slowtest"
)

// The bulk crash test: the console process is killed with
// SIGKILL in the middle of a bulk run; a new process resumes the run and
// finishes it, and every item was decided exactly once: one audit entry
// per item, none twice, the counts exact.

const bulkCrashWorkerEnv = "UNSTUCK_BULK_CRASH_WORKER"

// TestBulkCrashWorker is the console process of TestBulkCrash: the demo
// without traffic, no approval, small batches with a pause, so that the
// run is long enough to be killed in its middle.
func TestBulkCrashWorker(t *testing.T) {
	if os.Getenv(bulkCrashWorkerEnv) == "" {
		t.Skip("the console process of TestBulkCrash")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err := consolecmd.Run(ctx, []string{"demo", "--addr", "127.0.0.1:0", "--db", os.Getenv(crashDBEnv), "--traffic=false",
		"--approval-required", "none", "--bulk-batch", "25", "--bulk-pause", "40ms"},
		func(string) string { return "" }, os.Stdout, os.Stderr)
	require.NoError(t, err)
}

func startBulkWorker(t *testing.T, dbURL string) *consoletest.Process {
	t.Helper()
	cmd := consoletest.TestBinary("TestBulkCrashWorker", bulkCrashWorkerEnv+"=1", crashDBEnv+"="+dbURL)
	return consoletest.StartProcess(t, t, "console", cmd, "listening on ")
}

func TestBulkCrash(t *testing.T) {
	slowtest.Skip(t, slowtest.Fault)
	t.Parallel()
	// 20 batches of 25: the kill lands after at least 5 of them, with
	// batches still to run. (With 1,500 items the SQLite subtest alone ran
	// 140 to 315 s under -race on 2 cores; with 500, about 30 s.)
	const n = 500
	for _, d := range consoletest.DemoDatabases {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			url := d.URL(t)
			// The demo creates and migrates its database; then it stops.
			startBulkWorker(t, url).Stop(t)

			db, err := consolecmd.OpenDatabase(ctx, url)
			require.NoError(t, err)
			defer db.Close()
			keys, err := consolecmd.DemoAuditKeys(func(string) string { return "" }, consolecmd.DemoSecret, slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			db.UseAuditKeys(keys)
			recs := make([]idemdriver.Record, n)
			now := time.Now().UTC().Add(-time.Hour)
			for i := range recs {
				recs[i] = idemdriver.Record{Ident: idemdriver.Ident{Scope: "tenant:crash", Operation: "POST /charges", KeyDigest: fmt.Sprintf("%064x", i)},
					Fingerprint: "fp", Status: idemdriver.StatusPending, LastError: "provider timeout", Attempts: 1, Version: 1,
					Owner:     idemdriver.Owner{Token: fmt.Sprintf("owner-%d", i), Fence: int64(i + 1)},
					CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}
			}
			require.NoError(t, db.Records.(idemdriver.Seeder).SeedRecords(ctx, recs))
			engine, err := idem.New(db.Store, idem.Config{Secret: []byte(consolecmd.DemoSecret)})
			require.NoError(t, err)
			// Recorded here, running, with no River client: the console
			// resumes it when it starts.
			spec := ops.BulkSpec{Kind: ops.BulkKeys, Action: "forget", KeyFilter: idemdriver.KeyFilter{Scope: "tenant:crash"},
				FilterQuery: "scope=tenant%3Acrash", IncludeMayHaveHappened: true}
			req, err := db.RequestBulk(ctx, engine, ops.Actor{Username: "oncall", Role: "oncall"}, spec, "provider outage: rerun every charge", n)
			require.NoError(t, err)
			require.Equal(t, store.BulkRunning, req.Status)

			applied := func() int64 {
				got, ok, err := db.Console.BulkByID(ctx, req.ID)
				require.NoError(t, err)
				require.True(t, ok)
				return got.Counts[store.ItemApplied]
			}
			first := startBulkWorker(t, url)
			for seen, seenAt := int64(0), time.Now(); seen < n/4; {
				if a := applied(); a > seen {
					seen, seenAt = a, time.Now()
				}
				require.Less(t, time.Since(seenAt), 2*time.Minute, "the run did not move in two minutes (%d applied)", seen)
				time.Sleep(20 * time.Millisecond)
			}
			first.Kill(t)
			atKill := applied()
			require.Less(t, atKill, int64(n), "killed in the middle of the run")

			second := startBulkWorker(t, url)
			// The restarted run must keep moving: it fails when two minutes
			// pass without one more item applied, however long the whole
			// run takes on a loaded machine.
			progress, progressAt := atKill, time.Now()
			for {
				got, _, err := db.Console.BulkByID(ctx, req.ID)
				require.NoError(t, err)
				if got.Status == store.BulkDone {
					require.Equal(t, map[string]int64{store.ItemApplied: n}, got.Counts)
					break
				}
				if a := got.Counts[store.ItemApplied]; a > progress {
					progress, progressAt = a, time.Now()
				}
				require.Less(t, time.Since(progressAt), 2*time.Minute, "the run stopped moving: %+v", got.Counts)
				time.Sleep(100 * time.Millisecond)
			}
			second.Stop(t)

			perTarget := map[string]int{}
			var after int64
			for {
				page, next, err := db.Trail.List(ctx, audit.Filter{Action: "key.forget", After: after, Limit: audit.MaxLimit})
				require.NoError(t, err)
				for _, e := range page {
					require.Equal(t, ops.BulkRequestID(req.ID), e.RequestID)
					require.Equal(t, audit.OutcomeApplied, e.Outcome)
					perTarget[e.TargetID]++
				}
				if next == 0 {
					break
				}
				after = next
			}
			require.Len(t, perTarget, n, "one entry per item")
			for id, c := range perTarget {
				require.Equal(t, 1, c, "item %s decided once", id)
			}
			left, err := db.Records.ListKeys(ctx, idemdriver.KeyFilter{Scope: "tenant:crash"})
			require.NoError(t, err)
			require.Empty(t, left.Records)
			t.Logf("%s: killed with %d of %d applied; the restarted console finished the run", d.Name, atKill, n)
		})
	}
}
