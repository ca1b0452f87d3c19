package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// SPEC K14, K15: a snapshot's counts are written once per minute, hourly
// counts keep the highest, groups are replaced and closed, and two racing
// snapshotters never double-count.
func TestSnapshotK15(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := t.Context()
		t0 := time.Date(2026, 12, 1, 2, 10, 5, 0, time.UTC)
		snap := func(at time.Time, stuck int64, groups ...IncidentGroup) func(context.Context) (Snapshot, error) {
			return func(context.Context) (Snapshot, error) {
				return Snapshot{At: at, Trends: []TrendPoint{{Kind: "key", State: "stuck", Count: stuck, Exact: true},
					{Kind: "operation", State: "review_required", Count: 2, Exact: false}}, Groups: groups}, nil
			}
		}
		g1 := IncidentGroup{Key: "aaaaaaaaaaaaaaaaaaaaaaaa", Kind: "key", State: "pending", Operation: "POST /pay", Class: "pending",
			Message: "provider timed out after <n>s", Sample: "provider timed out after 30s", Count: 3, Exact: true,
			FirstSeen: t0.Add(-time.Hour), LastSeen: t0.Add(-time.Minute)}

		res, err := b.db.WriteSnapshot(ctx, snap(t0, 12, g1))
		require.NoError(t, err)
		require.True(t, res.Leader)
		require.Len(t, res.New, 1, "a group not seen before is new")
		// The same minute again (a second console, a restart): ignored for
		// the minute, the hour keeps its highest.
		res, err = b.db.WriteSnapshot(ctx, snap(t0.Add(20*time.Second), 99, g1))
		require.NoError(t, err)
		require.True(t, res.Leader)
		require.Empty(t, res.New, "a current group is not new")
		// The next minute: fewer stuck; the group grew.
		g1b := g1
		g1b.Count, g1b.FirstSeen, g1b.LastSeen = 5, t0.Add(-30*time.Minute), t0.Add(30*time.Second)
		_, err = b.db.WriteSnapshot(ctx, snap(t0.Add(time.Minute), 4, g1b))
		require.NoError(t, err)

		mins, err := b.db.Trends(ctx, TrendMinute, t0.Add(-time.Hour))
		require.NoError(t, err)
		var stuck []int64
		for _, s := range mins {
			if s.Kind == "key" && s.State == "stuck" {
				stuck = append(stuck, s.Count)
			}
		}
		require.Equal(t, []int64{12, 4}, stuck, "one count per minute: the first snapshot of a minute wins")
		hours, err := b.db.Trends(ctx, TrendHour, t0.Add(-2*time.Hour))
		require.NoError(t, err)
		require.Contains(t, hours, TrendSample{Kind: "key", State: "stuck", At: t0.Truncate(time.Hour), Count: 99}, "the hour keeps its highest")
		quarters, err := b.db.Trends(ctx, TrendQuarter, t0.Add(-2*time.Hour))
		require.NoError(t, err)
		require.Contains(t, quarters, TrendSample{Kind: "key", State: "stuck", At: t0.Truncate(15 * time.Minute), Count: 99}, "so does the quarter")

		totals, err := b.db.IncidentTotals(ctx)
		require.NoError(t, err)
		require.Equal(t, []IncidentTotal{{Kind: "key", Groups: 1, Items: 5, Exact: true}}, totals)
		gh, err := b.db.IncidentHours(ctx, t0.Truncate(time.Hour))
		require.NoError(t, err)
		require.Equal(t, map[string]map[time.Time]int64{g1.Key: {t0.Truncate(time.Hour): 5}}, gh, "the hour keeps the group's highest")

		got, ok, err := b.db.IncidentGroup(ctx, g1.Key)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, int64(5), got.Count, "replaced, never added")
		require.Equal(t, g1.FirstSeen, got.FirstSeen, "first seen is the earliest any snapshot saw")
		require.Equal(t, g1b.LastSeen, got.LastSeen)
		require.Equal(t, g1.Sample, got.Sample)
		at, ok, err := b.db.LastSnapshot(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, t0.Add(time.Minute).Truncate(time.Minute), at)

		// A snapshot without the group closes it; it leaves the list.
		_, err = b.db.WriteSnapshot(ctx, snap(t0.Add(2*time.Minute), 0))
		require.NoError(t, err)
		list, err := b.db.IncidentGroups(ctx, 0)
		require.NoError(t, err)
		require.Empty(t, list)
		got, ok, err = b.db.IncidentGroup(ctx, g1.Key)
		require.NoError(t, err)
		require.True(t, ok, "a closed group is kept for its link")
		require.Zero(t, got.Count)

		// Retention: 8 days later the minute rows, the closed group and
		// its hours are gone; the hourly counts stay.
		_, err = b.db.WriteSnapshot(ctx, snap(t0.Add(8*24*time.Hour), 1))
		require.NoError(t, err)
		mins, err = b.db.Trends(ctx, TrendMinute, time.Time{})
		require.NoError(t, err)
		require.Len(t, mins, 2, "only the latest minute's two counts: %v", mins)
		_, ok, err = b.db.IncidentGroup(ctx, g1.Key)
		require.NoError(t, err)
		require.False(t, ok)
		hours, err = b.db.Trends(ctx, TrendHour, time.Time{})
		require.NoError(t, err)
		require.Len(t, hours, 4)
		quarters, err = b.db.Trends(ctx, TrendQuarter, time.Time{})
		require.NoError(t, err)
		require.Len(t, quarters, 2, "quarters are kept 2 days")
	})
}

// Two consoles racing for the same minute: on PostgreSQL (the advisory
// lock) and MySQL (GET_LOCK) only one computes; on every dialect the
// minute holds one count and the group one count, not their sum.
func TestSnapshotRaceK15(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := t.Context()
		at := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
		var computed atomic.Int32
		release := make(chan struct{})
		compute := func(context.Context) (Snapshot, error) {
			computed.Add(1)
			<-release
			return Snapshot{At: at, Trends: []TrendPoint{{Kind: "key", State: "pending", Count: 7, Exact: true}},
				Groups: []IncidentGroup{{Key: "bbbbbbbbbbbbbbbbbbbbbbbb", Kind: "key", State: "pending", Count: 7, Exact: true,
					FirstSeen: at, LastSeen: at}}}, nil
		}
		// One leader at a time: the loser of the lock returns at once.
		locks := b.pool != nil || b.db.Dialect() == DialectMySQL
		var (
			wg      sync.WaitGroup
			leaders atomic.Int32
			news    atomic.Int32
		)
		for range 2 {
			wg.Go(func() {
				res, err := b.db.WriteSnapshot(ctx, compute)
				require.NoError(t, err)
				if res.Leader {
					leaders.Add(1)
				}
				news.Add(int32(len(res.New)))
			})
		}
		if locks {
			// Both have asked for the lock once one computes; the
			// other has returned.
			require.Eventually(t, func() bool { return computed.Load() == 1 }, 10*time.Second, 10*time.Millisecond)
			time.Sleep(200 * time.Millisecond)
		}
		close(release)
		wg.Wait()
		if locks {
			require.Equal(t, int32(1), news.Load(), "the new group is reported once")
			require.Equal(t, int32(1), leaders.Load(), "one leader")
			require.Equal(t, int32(1), computed.Load())
		}
		mins, err := b.db.Trends(ctx, TrendMinute, time.Time{})
		require.NoError(t, err)
		require.Equal(t, []TrendSample{{Kind: "key", State: "pending", At: at, Count: 7}}, mins)
		list, err := b.db.IncidentGroups(ctx, 0)
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, int64(7), list[0].Count)
	})
}

// ImportTrends loads past counts that the trend reads return, and skips
// what is there.
func TestImportTrends(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		at := time.Date(2026, 11, 30, 10, 7, 0, 0, time.UTC)
		rows := []TrendRow{{At: at, Kind: "key", State: "failed", Count: 5, Exact: true},
			{Res: TrendHour, At: at.Truncate(time.Hour), Kind: "key", State: "failed", Count: 9}}
		require.NoError(t, b.db.ImportTrends(t.Context(), rows))
		rows[0].Count = 6
		require.NoError(t, b.db.ImportTrends(t.Context(), rows), "again: skipped")
		mins, err := b.db.Trends(t.Context(), TrendMinute, at.Add(-time.Hour))
		require.NoError(t, err)
		require.Equal(t, []TrendSample{{Kind: "key", State: "failed", At: at, Count: 5}}, mins)
		hours, err := b.db.Trends(t.Context(), TrendHour, at.Add(-time.Hour))
		require.NoError(t, err)
		require.Equal(t, []TrendSample{{Kind: "key", State: "failed", At: at.Truncate(time.Hour), Count: 9}}, hours)
	})
}

// MySQL commits each DDL statement on its own: migration 006 run again
// over its tables, or over a part of them (a crash between statements),
// leaves them whole and keeps their rows.
func TestMySQLIncidentMigrationRerun(t *testing.T) {
	t.Parallel()
	b := setupMySQL(t)
	ctx := t.Context()
	at := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	require.NoError(t, b.db.ImportTrends(ctx, []TrendRow{{At: at, Kind: "key", State: "failed", Count: 3, Exact: true}}))
	for _, stmt := range []string{
		`DROP TABLE unstuck_console_incident_hour`,
		`DELETE FROM unstuck_migration WHERE line = 'console' AND version = 6`,
	} {
		_, err := b.sqlDB.ExecContext(ctx, stmt)
		require.NoError(t, err)
	}
	require.NoError(t, b.db.Migrate(ctx))
	mins, err := b.db.Trends(ctx, TrendMinute, at)
	require.NoError(t, err)
	require.Equal(t, []TrendSample{{Kind: "key", State: "failed", At: at, Count: 3}}, mins, "the rows are kept")
	_, err = b.db.WriteSnapshot(ctx, func(context.Context) (Snapshot, error) {
		return Snapshot{At: at, Groups: []IncidentGroup{{Key: "cccccccccccccccccccccccc", Kind: "key", State: "failed", Count: 2, Exact: true}}}, nil
	})
	require.NoError(t, err, "the dropped table is back")
	h, err := b.db.IncidentHours(ctx, at)
	require.NoError(t, err)
	require.Equal(t, map[string]map[time.Time]int64{"cccccccccccccccccccccccc": {at: 2}}, h)
}

// The MySQL snapshot lock is per database (GET_LOCK names are
// server-wide): while a console of one database holds it, a console of
// another database on the same server is its own leader.
func TestMySQLSnapshotLockPerDatabaseK15(t *testing.T) {
	t.Parallel()
	a, b := setupMySQL(t), setupMySQL(t)
	at := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)
	snap := Snapshot{At: at, Trends: []TrendPoint{{Kind: "key", State: "failed", Count: 1, Exact: true}}}
	holding, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		res, err := a.db.WriteSnapshot(t.Context(), func(context.Context) (Snapshot, error) {
			close(holding)
			<-release
			return snap, nil
		})
		if err == nil && !res.Leader {
			err = errors.New("a: not the leader")
		}
		done <- err
	}()
	<-holding
	res, err := b.db.WriteSnapshot(t.Context(), func(context.Context) (Snapshot, error) { return snap, nil })
	require.NoError(t, err)
	require.True(t, res.Leader, "another database's lock is not this one's")
	res, err = a.db.WriteSnapshot(t.Context(), func(context.Context) (Snapshot, error) { return snap, nil })
	require.NoError(t, err)
	require.False(t, res.Leader, "the same database's lock is held")
	close(release)
	require.NoError(t, <-done)
	res, err = a.db.WriteSnapshot(t.Context(), func(context.Context) (Snapshot, error) { return snap, nil })
	require.NoError(t, err)
	require.True(t, res.Leader, "released after the snapshot")
}

// A MySQL snapshot whose computation fails, its context cancelled, leaves
// the lock free: the next snapshot is the leader's.
func TestMySQLSnapshotLockReleasedOnFailureK15(t *testing.T) {
	t.Parallel()
	b := setupMySQL(t)
	ctx, cancel := context.WithCancel(t.Context())
	_, err := b.db.WriteSnapshot(ctx, func(ctx context.Context) (Snapshot, error) {
		cancel()
		return Snapshot{}, ctx.Err()
	})
	require.ErrorIs(t, err, context.Canceled)
	var free int
	require.NoError(t, b.sqlDB.QueryRowContext(t.Context(), `SELECT IS_FREE_LOCK(CONCAT('unstuck_snapshot_', SHA1(DATABASE())))`).Scan(&free))
	require.Equal(t, 1, free, "no session holds the lock, not even a pooled one")
	res, err := b.db.WriteSnapshot(t.Context(), func(context.Context) (Snapshot, error) {
		return Snapshot{At: time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)}, nil
	})
	require.NoError(t, err)
	require.True(t, res.Leader)
	require.NoError(t, b.sqlDB.QueryRowContext(t.Context(), `SELECT IS_FREE_LOCK(CONCAT('unstuck_snapshot_', SHA1(DATABASE())))`).Scan(&free))
	require.Equal(t, 1, free, "released after a snapshot too")
}

// On MySQL a snapshot's rows go in multi-row statements of at most
// mysqlBatchRows rows: more groups and imported counts than that are all
// written, once.
func TestMySQLSnapshotBatchesK15(t *testing.T) {
	t.Parallel()
	b := setupMySQL(t)
	ctx := t.Context()
	at := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	n := 2*mysqlBatchRows + 345
	var groups []IncidentGroup
	rows := make([]TrendRow, 0, n)
	for i := range n {
		groups = append(groups, IncidentGroup{Key: fmt.Sprintf("%024x", i), Kind: "key", State: "failed", Count: int64(i + 1), Exact: true})
		rows = append(rows, TrendRow{At: at.Add(-time.Duration(i+1) * time.Minute), Kind: "key", State: "failed", Count: int64(i)})
	}
	for range 2 {
		_, err := b.db.WriteSnapshot(ctx, func(context.Context) (Snapshot, error) { return Snapshot{At: at, Groups: groups}, nil })
		require.NoError(t, err)
		require.NoError(t, b.db.ImportTrends(ctx, rows))
	}
	got, err := b.db.IncidentGroups(ctx, 0)
	require.NoError(t, err)
	require.Len(t, got, MaxIncidentGroups)
	require.Equal(t, int64(n), got[0].Count, "the largest first")
	totals, err := b.db.IncidentTotals(ctx)
	require.NoError(t, err)
	require.Equal(t, []IncidentTotal{{Kind: "key", Groups: int64(n), Items: int64(n * (n + 1) / 2), Exact: true}}, totals)
	mins, err := b.db.Trends(ctx, TrendMinute, time.Time{})
	require.NoError(t, err)
	require.Len(t, mins, n)
}
