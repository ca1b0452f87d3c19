package incident_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idempgx"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/idem/idemtest"
	"github.com/unstuckhq/unstuck/internal/incident"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/saga/sagapgx"
	"github.com/unstuckhq/unstuck/saga/sagasqlite"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

func TestMain(m *testing.M) { pgtest.RunMain(m) }

type testBundle struct {
	keys   idemdriver.Admin
	seeder idemdriver.Seeder
	ops    sagadriver.Admin
	imp    sagadriver.Importer
	db     *store.DB
}

func eachDialect(t *testing.T, fn func(t *testing.T, b testBundle)) {
	t.Helper()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		pool := pgtest.Schema(t)
		keys := idempgx.New(pool)
		require.NoError(t, keys.Migrate(t.Context()))
		ops := sagapgx.New(pool)
		require.NoError(t, ops.Migrate(t.Context()))
		db := store.NewPostgres(pool)
		require.NoError(t, db.Migrate(t.Context()))
		fn(t, testBundle{keys: keys, seeder: keys, ops: ops, imp: ops, db: db})
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		sqlDB, err := idemsqlite.Open(filepath.Join(t.TempDir(), "console.db"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = sqlDB.Close() })
		keys := idemsqlite.New(sqlDB)
		require.NoError(t, keys.Migrate(t.Context()))
		ops := sagasqlite.New(sqlDB)
		require.NoError(t, ops.Migrate(t.Context()))
		db := store.NewSQLite(sqlDB)
		require.NoError(t, db.Migrate(t.Context()))
		fn(t, testBundle{keys: keys, seeder: keys, ops: ops, imp: ops, db: db})
	})
}

// seed makes keys and operations in every incident state, and some that
// make none.
func seed(t *testing.T, b testBundle) {
	t.Helper()
	now := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	n := 0
	rec := func(op string, status idemdriver.Status, lastErr string, code int, lease time.Time) idemdriver.Record {
		n++
		return idemdriver.Record{Ident: idemdriver.Ident{Scope: "user:1", Operation: op, KeyDigest: fmt.Sprintf("%064x", n)},
			Status: status, LastError: lastErr, ResponseCode: code, LeaseExpiresAt: lease, Attempts: 1, Version: 1,
			Owner:     idemdriver.Owner{Token: fmt.Sprintf("o-%d", n), Fence: int64(n)},
			CreatedAt: now.Add(time.Duration(n) * time.Second), UpdatedAt: now.Add(time.Duration(n) * time.Second), ExpiresAt: now.Add(48 * time.Hour)}
	}
	var recs []idemdriver.Record
	for _, who := range []string{"bob+17", "alice+3", "carol+99"} {
		recs = append(recs, rec("POST /signups", idemdriver.StatusPending, "mailbox "+who+"@example.com does not exist", 0, time.Time{}))
	}
	recs = append(recs,
		rec("POST /payments", idemdriver.StatusPending, "provider timed out after 30s", 0, time.Time{}),
		rec("POST /payments", idemdriver.StatusPending, "provider timed out after 12s", 0, time.Time{}),
		rec("POST /payments", idemdriver.StatusFailed, "", 402, time.Time{}),
		rec("job:sync", idemdriver.StatusProcessing, "", 0, now.Add(time.Minute)),            // stuck
		rec("job:export", idemdriver.StatusProcessing, "", 0, time.Now().Add(24*time.Hour)),  // live lease: none
		rec("POST /orders", idemdriver.StatusCompleted, "", 201, time.Time{}),                // none
		rec("console POST /keys/{id}/forget", idemdriver.StatusPending, "x", 0, time.Time{}), // the console's own: none
	)
	require.NoError(t, b.seeder.SeedRecords(t.Context(), recs))

	var ops []sagadriver.Operation
	for i, msg := range []string{"workspace: timeout after 5s", "workspace: timeout after 9s", "workspace: quota exceeded"} {
		at := now.Add(time.Duration(i) * time.Minute)
		id := fmt.Sprintf("op-%d", i)
		ops = append(ops, sagadriver.Operation{ID: id, Type: "signup", Status: sagadriver.StatusReviewRequired, CurrentStep: "workspace",
			LastError: msg, ReviewReason: "uncertain_unresolved", Version: 3, CreatedAt: at, UpdatedAt: at, Input: []byte(`{}`),
			Steps: []sagadriver.StepRecord{{Name: "workspace", Seq: 0, Kind: sagadriver.Pivot, System: "workspace-api",
				Status: sagadriver.StepUncertain, Key: id + "/workspace", MaxAttempts: 3, UpdatedAt: at}}})
	}
	at := now.Add(5 * time.Minute)
	ops = append(ops, sagadriver.Operation{ID: "op-done", Type: "signup", Status: sagadriver.StatusCompleted, CurrentStep: "workspace",
		Version: 3, CreatedAt: at, UpdatedAt: at, FinishedAt: &at, Input: []byte(`{}`)})
	require.NoError(t, b.imp.ImportOperations(t.Context(), ops, nil, nil))
}

// SPEC K14, K15: a snapshot at a fixed time counts every state and groups
// the incidents by cause.
func TestSnapshotterK14(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		seed(t, b)
		clock := idemtest.NewClock(time.Date(2026, 12, 1, 2, 10, 0, 0, time.UTC))
		s := &incident.Snapshotter{Keys: b.keys, Ops: b.ops, Store: b.db, NowFunc: clock.Now}
		var fresh []store.IncidentGroup
		s.OnNewGroups = func(_ context.Context, gs []store.IncidentGroup) { fresh = append(fresh, gs...) }
		leader, err := s.Once(t.Context())
		require.NoError(t, err)
		require.True(t, leader)

		groups, err := b.db.IncidentGroups(t.Context(), 0)
		require.NoError(t, err)
		type row struct {
			kind, state, op, step, msg, system string
			count                              int64
		}
		var got []row
		for _, g := range groups {
			require.True(t, g.Exact)
			got = append(got, row{g.Kind, g.State, g.Operation, g.Step, g.Message, g.System, g.Count})
		}
		want := []row{
			{"key", "pending", "POST /signups", "", "mailbox <email> does not exist", "", 3},
			{"key", "pending", "POST /payments", "", "provider timed out after <n>s", "", 2},
			{"operation", "review_required", "signup", "workspace", "workspace: timeout after <n>s", "workspace-api", 2},
			{"key", "failed", "POST /payments", "", "HTTP <n>", "", 1},
			{"key", "stuck", "job:sync", "", "processing past its lease: its owner is presumably gone", "", 1},
			{"operation", "review_required", "signup", "workspace", "workspace: quota exceeded", "workspace-api", 1},
		}
		slices.SortFunc(got, func(a, b row) int {
			return cmpRow(a.count, b.count, a.kind+a.state+a.op+a.msg, b.kind+b.state+b.op+b.msg)
		})
		slices.SortFunc(want, func(a, b row) int {
			return cmpRow(a.count, b.count, a.kind+a.state+a.op+a.msg, b.kind+b.state+b.op+b.msg)
		})
		require.Equal(t, want, got)

		trends, err := b.db.Trends(t.Context(), store.TrendMinute, clock.Now().Add(-time.Hour))
		require.NoError(t, err)
		counts := map[string]int64{}
		for _, p := range trends {
			require.Equal(t, clock.Now(), p.At, "the snapshot's time is the fixed clock's")
			counts[p.Kind+"/"+p.State] = p.Count
		}
		require.Equal(t, int64(6), counts["key/pending"])
		require.Equal(t, int64(1), counts["key/stuck"])
		require.Equal(t, int64(3), counts["operation/review_required"])
		require.Len(t, fresh, 6, "every group of the first snapshot is new")
		fresh = nil

		// A minute later, a new cause appears: it is announced once.
		clock.Advance(time.Minute)
		require.NoError(t, b.seeder.SeedRecords(t.Context(), []idemdriver.Record{{Ident: idemdriver.Ident{Scope: "user:2",
			Operation: "POST /refunds", KeyDigest: fmt.Sprintf("%064x", 999)}, Status: idemdriver.StatusUnavailable,
			LastError: "response not stored: disk full", Owner: idemdriver.Owner{Token: "o-999", Fence: 999}, Attempts: 1, Version: 1,
			CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC(), ExpiresAt: time.Now().Add(time.Hour).UTC()}}))
		_, err = s.Once(t.Context())
		require.NoError(t, err)
		require.Len(t, fresh, 1)
		require.Equal(t, "POST /refunds", fresh[0].Operation)
		_, err = s.Once(t.Context())
		require.NoError(t, err)
		require.Len(t, fresh, 1, "announced once")
	})
}

func cmpRow(a, b int64, as, bs string) int {
	switch {
	case a != b:
		return int(b - a)
	case as < bs:
		return -1
	case as > bs:
		return 1
	}
	return 0
}

// A scan cap makes the groups of a capped state lower bounds.
func TestSnapshotterCapK14(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		seed(t, b)
		s := &incident.Snapshotter{Keys: b.keys, Ops: b.ops, Store: b.db, ScanCap: 2}
		snap, err := s.Compute(t.Context())
		require.NoError(t, err)
		var pendingCounted int64
		for _, g := range snap.Groups {
			if g.Kind == "key" && g.State == "pending" {
				require.False(t, g.Exact, "pending was capped: %+v", g)
				pendingCounted += g.Count
			}
			if g.Kind == "key" && g.State == "stuck" {
				require.True(t, g.Exact, "one stuck key is under the cap")
			}
		}
		require.Positive(t, pendingCounted)
		require.LessOrEqual(t, pendingCounted, int64(2), "no more than the cap read")
	})
}
