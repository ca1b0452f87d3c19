package store

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemmysql"
	"github.com/unstuckhq/unstuck/unstucktest/mysqltest"
)

// BenchmarkMySQLSnapshotWrite (SPEC K15) times the leader's write of one
// snapshot on MySQL: 13 counts per state and benchSnapshotGroups current
// groups, one new minute per operation, over tables that hold the groups
// already (the steady state of a console). "engine" is
// [DB.WriteSnapshot] with a compute that returns the snapshot at once: the
// lock, the retention deletes, the read of the current groups, the
// multi-row upserts, the close, the commit, the unlock. "limit" is the
// least the database can do for the same rows: in one transaction on
// another database's copy of the tables, one multi-row INSERT … ON
// DUPLICATE KEY UPDATE per table and the close. Each round
// (UNSTUCK_BENCH_ROUNDS) runs both in alternating order. It only reports.
func BenchmarkMySQLSnapshotWrite(b *testing.B) {
	engine, limit := benchMySQLStore(b), benchMySQLStore(b)
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var minute int
	next := func() Snapshot {
		minute++
		return benchSnapshot(start.Add(time.Duration(minute) * time.Minute))
	}
	ctx := context.Background()
	benchPair(b, func(b *testing.B) {
		for b.Loop() {
			s := next()
			if _, err := engine.WriteSnapshot(ctx, func(context.Context) (Snapshot, error) { return s, nil }); err != nil {
				b.Fatal(err)
			}
		}
	}, func(b *testing.B) {
		for b.Loop() {
			if err := benchLimitWrite(ctx, limit, next()); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchPair runs engine and limit as sub-benchmarks of b named
// "engine/goroutines=1" and "limit/goroutines=1", UNSTUCK_BENCH_ROUNDS
// times (default 1), the engine first in even rounds and the limit first
// in odd ones: the rounds and names of the library's benchmarks (its
// benchround package is internal to idem), so that one script reads both.
func benchPair(b *testing.B, engine, limit func(b *testing.B)) {
	rounds, err := strconv.Atoi(os.Getenv("UNSTUCK_BENCH_ROUNDS"))
	if err != nil || rounds < 1 {
		rounds = 1
	}
	sides := [2]struct {
		name string
		fn   func(b *testing.B)
	}{{"engine", engine}, {"limit", limit}}
	for round := range rounds {
		for i := range sides {
			side := sides[(round+i)%2]
			b.Run(side.name+"/goroutines=1", side.fn)
		}
	}
}

const benchSnapshotGroups = 200

func benchMySQLStore(b *testing.B) *DB {
	b.Helper()
	sqlDB, err := idemmysql.Open(mysqltest.NewDatabase(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sqlDB.Close() })
	db := NewMySQL(sqlDB)
	if err := db.Migrate(b.Context()); err != nil {
		b.Fatal(err)
	}
	return db
}

func benchSnapshot(at time.Time) Snapshot {
	s := Snapshot{At: at}
	for _, st := range []string{"pending", "processing", "completed", "failed", "unavailable", "stuck", "expired"} {
		s.Trends = append(s.Trends, TrendPoint{Kind: "key", State: st, Count: int64(at.Minute() + 1), Exact: true})
	}
	for _, st := range []string{"running", "compensating", "completed", "failed", "review_required", "cancelled"} {
		s.Trends = append(s.Trends, TrendPoint{Kind: "operation", State: st, Count: int64(at.Minute() + 1), Exact: true})
	}
	for i := range benchSnapshotGroups {
		s.Groups = append(s.Groups, IncidentGroup{Key: fmt.Sprintf("%024x", i), Kind: "key", State: "failed", Operation: "POST /pay",
			Class: "failed", Message: fmt.Sprintf("provider error %d after <n>s", i), Sample: fmt.Sprintf("provider error %d after 30s", i),
			Count: int64(i + at.Minute()), Exact: true, FirstSeen: at.Add(-time.Hour), LastSeen: at})
	}
	return s
}

// benchLimitWrite writes s's rows as one multi-row upsert per table and
// the close, in one transaction.
func benchLimitWrite(ctx context.Context, db *DB, s Snapshot) error {
	tx, err := db.sqlite.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	at := s.At.Unix()
	rows := func(n, cols int) string {
		one := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
		return strings.TrimSuffix(strings.Repeat(one+", ", n), ", ")
	}
	var args []any
	for _, p := range s.Trends {
		for _, r := range []Resolution{TrendMinute, TrendQuarter, TrendHour} {
			args = append(args, string(r), r.start(s.At), p.Kind, p.State, p.Count, boolInt(p.Exact))
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO unstuck_console_trend (res, at, kind, state, count, exact) VALUES `+rows(3*len(s.Trends), 6)+`
ON DUPLICATE KEY UPDATE exact = IF(res <> 'm' AND VALUES(count) > count, VALUES(exact), exact),
    count = IF(res <> 'm', GREATEST(count, VALUES(count)), count)`, args...); err != nil {
		return err
	}
	args = args[:0]
	hourArgs := []any{}
	for _, g := range s.Groups {
		args = append(args, g.Key, g.Kind, g.State, g.Operation, g.Step, g.Class, g.Message, g.System, g.Sample, g.Count, boolInt(g.Exact),
			g.FirstSeen.Unix(), g.LastSeen.Unix(), at)
		hourArgs = append(hourArgs, g.Key, TrendHour.start(s.At), g.Count)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO unstuck_console_incident (group_key, kind, state, operation, step, class, message, `system`, sample,"+`
    count, exact, first_seen, last_seen, updated_at) VALUES `+rows(len(s.Groups), 14)+`
ON DUPLICATE KEY UPDATE sample = VALUES(sample), count = VALUES(count), exact = VALUES(exact),
    first_seen = LEAST(first_seen, VALUES(first_seen)), last_seen = GREATEST(last_seen, VALUES(last_seen)), updated_at = VALUES(updated_at)`,
		args...); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO unstuck_console_incident_hour (group_key, hour, count) VALUES `+rows(len(s.Groups), 3)+`
ON DUPLICATE KEY UPDATE count = GREATEST(count, VALUES(count))`, hourArgs...); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE unstuck_console_incident SET count = 0, updated_at = ? WHERE updated_at < ? AND count > 0`, at, at); err != nil {
		return err
	}
	return tx.Commit()
}
