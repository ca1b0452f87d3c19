package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idempgx"
	"github.com/unstuckhq/unstuck/unstucktest/mysqltest"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
	"github.com/unstuckhq/unstuck/unstucktest/redistest"
	"github.com/unstuckhq/unstuck/unstucktest/slowtest"
)

func TestMain(m *testing.M) { pgtest.RunMain(m); redistest.Stop() }

func TestHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"help"}, &out, &errOut))
	require.Contains(t, out.String(), "bench seed")
	for _, cmd := range []string{"seed", "console", "pages", "storage", "sweep", "commits"} {
		out.Reset()
		errOut.Reset()
		require.NoError(t, run(t.Context(), []string{cmd, "--help"}, &out, &errOut))
		require.Contains(t, errOut.String(), "--db", cmd)
		require.ErrorIs(t, run(t.Context(), []string{cmd}, &out, &errOut), errUsage, "%s without --db", cmd)
	}
	require.ErrorIs(t, run(t.Context(), nil, &out, &errOut), errUsage)
	require.ErrorIs(t, run(t.Context(), []string{"nope"}, &out, &errOut), errUsage)
}

// TestSeedAndMeasure seeds a tiny database and measures every case once,
// so that the tool keeps working as the store and the pages change.
func TestSeedAndMeasure(t *testing.T) {
	slowtest.Skip(t, slowtest.Scale)
	ctx := t.Context()
	dbURL := pgtest.Database(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	// What the migrations create, to compare with what the seed leaves.
	require.NoError(t, migrate(ctx, pool))
	before := schemaObjects(t, pool)

	rep, err := seedDatabase(ctx, pool, seedConfig{Keys: 1000, Operations: 100, Tenants: 50, Span: 30 * 24 * time.Hour,
		Now: time.Now().UTC(), Parallel: 2, Batch: 300, Seed: 1})
	require.NoError(t, err)
	require.EqualValues(t, 1000, rep.Keys)
	require.EqualValues(t, 300, rep.Steps)
	require.Positive(t, rep.Events)
	require.Equal(t, before, schemaObjects(t, pool), "the seed restores every index and constraint")

	o, err := idempgx.New(pool).KeyOverview(ctx)
	require.NoError(t, err)
	var n, statuses int64
	for _, c := range o.Counts {
		require.True(t, c.Exact, "under the cap: %s", c.Status)
		n += c.Count
		if c.Count > 0 {
			statuses++
		}
	}
	require.EqualValues(t, 1000, n)
	require.GreaterOrEqual(t, statuses, int64(3), "several statuses")
	_, err = seedDatabase(ctx, pool, seedConfig{Keys: 1, Tenants: 1, Span: time.Hour, Now: time.Now(), Parallel: 1, Batch: 1})
	require.ErrorContains(t, err, "not empty")

	var out bytes.Buffer
	results, err := measureConsole(ctx, pool, consoleConfig{N: 1, DeepPages: 2, Explain: true, Out: &out})
	require.NoError(t, err)
	byName := map[string]*result{}
	for _, r := range results {
		byName[r.c.name] = r
		require.Len(t, r.db, 1, r.c.name)
		if r.c.path == "" {
			continue // a part of the overview: store call only
		}
		require.Len(t, r.html, 1, r.c.name)
		require.Positive(t, r.bytes, r.c.name)
	}
	require.Equal(t, 1, byName["keys: raw key lookup"].rows, "the raw key of a seeded record finds it")
	require.Equal(t, 1, byName["key detail"].rows)
	require.Equal(t, 51, byName["keys: first page"].rows+1)
	require.Positive(t, byName["operation detail (review_required)"].rows)
	require.Positive(t, byName["operation detail (completed)"].rows)
	for _, name := range []string{"operations: correlation ID", "operations: external ID", "operations: very deep page"} {
		require.Positive(t, byName[name].rows, "%s: the filter value comes from the seeded operations", name)
	}
	report := out.String()
	require.Contains(t, report, "| overview |")
	require.Contains(t, report, "| incidents |")
	require.Contains(t, report, "#### keys: first page")
	if !strings.Contains(report, "no plan:") {
		require.Contains(t, report, "Index Scan", "auto_explain plans")
	}

	// bench pages: every page against its limit, one short round each way.
	out.Reset()
	pages, err := measurePages(ctx, dbURL, pagesConfig{Rounds: 2, N: 1, Out: &out})
	require.NoError(t, err)
	require.Len(t, pages, 4)
	for _, p := range pages {
		require.Len(t, p.rate, 2, p.row.name)
		require.Positive(t, p.rate[0], p.row.name)
	}
	require.Contains(t, out.String(), "| `/keys?state=failed` |")
}

// schemaObjects lists the indexes and constraints of the seeded tables.
func schemaObjects(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT indexdef FROM pg_indexes WHERE tablename = ANY($1)
UNION ALL
SELECT conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid::regclass::text = ANY($1)
ORDER BY 1`, seededTables)
	require.NoError(t, err)
	objs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, objs)
	return objs
}

// TestStorage loads a few records into each store and measures them: the
// engine's table and indexes, and the raw minimum beside them.
func TestStorage(t *testing.T) {
	slowtest.Skip(t, slowtest.Scale)
	stores := map[string]string{
		"SQLite":     "sqlite:" + filepath.Join(t.TempDir(), "storage.db"),
		"PostgreSQL": pgtest.Database(t),
		"MySQL":      mysqltest.NewDatabase(t),
		"Redis":      "redis://" + redistest.VolatileServer(t) + "/5",
	}
	for name, db := range stores {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			require.NoError(t, run(t.Context(), []string{"storage", "--db", db, "--keys", "3000", "--batch", "1000"}, &out, &errOut), errOut.String())
			report := out.String()
			require.Contains(t, report, "3000 records", report)
			require.NotContains(t, report, "past their retention", "no sweep without --expired")
			m := regexp.MustCompile(`engine ÷ raw minimum: ([0-9.]+)`).FindStringSubmatch(report)
			require.NotNil(t, m, report)
			ratio, err := strconv.ParseFloat(m[1], 64)
			require.NoError(t, err)
			require.Greater(t, ratio, 0.5, "the engine keeps what the raw minimum keeps:\n%s", report)
			if name != "Redis" {
				require.Contains(t, report, "index", report)
			}
			// A store that holds records is refused.
			err = run(t.Context(), []string{"storage", "--db", db, "--keys", "10"}, &out, &errOut)
			require.Error(t, err)
		})
	}
}

// TestStorageSweep loads a few records into each store, half of them past
// their retention, sweeps them with the engine and reads what the sweep
// left; --expired out of [0, 1) is refused.
func TestStorageSweep(t *testing.T) {
	slowtest.Skip(t, slowtest.Scale)
	var out, errOut bytes.Buffer
	for _, bad := range []string{"-0.1", "1", "NaN"} {
		errOut.Reset()
		err := run(t.Context(), []string{"storage", "--db", "sqlite:" + filepath.Join(t.TempDir(), "bad.db"), "--expired", bad}, &out, &errOut)
		require.ErrorIs(t, err, errUsage, bad)
		require.Contains(t, errOut.String(), "--expired", bad)
	}
	// What the sweep deletes: the finished records among those the loader
	// makes past their retention, a function of each record's index.
	const keys = 2000
	now := time.Now().UTC()
	g := newGenerator(seedConfig{Keys: keys, Tenants: 20_000, Span: storageSpan, Now: now, Seed: 1, Retention: storageSpan / 2})
	finished := 0
	for i := range keys {
		r := g.keyRecord(i)
		if !r.ExpiresAt.After(now) && r.Status != idemdriver.StatusPending && r.Status != idemdriver.StatusProcessing {
			finished++
		}
	}
	require.InDelta(t, keys/2, finished, keys/20)
	stores := map[string]struct {
		db   string
		left []string // rows of the table of what the sweep left
	}{
		"SQLite":     {"sqlite:" + filepath.Join(t.TempDir(), "sweep.db"), []string{"database file", "free pages", "WAL file"}},
		"PostgreSQL": {pgtest.Database(t), []string{"table", "indexes", "dead tuples"}},
		"MySQL":      {mysqltest.NewDatabase(t), []string{"data_length", "index_length", "data_free", "history list length"}},
		"Redis":      {"redis://" + redistest.VolatileServer(t) + "/6", []string{"used_memory", "used_memory_rss", "keys"}},
	}
	for name, s := range stores {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := []string{"storage", "--db", s.db, "--keys", strconv.Itoa(keys), "--batch", "1000", "--expired", "0.5"}
			require.NoError(t, run(t.Context(), args, &out, &errOut), errOut.String())
			report := out.String()
			require.Contains(t, report, "engine ÷ raw minimum", report)
			require.Contains(t, report, fmt.Sprintf("(%d finished:", finished), report)
			m := regexp.MustCompile(`(?m)^sweep: (\d+) deleted, (\d+) escalated in [0-9.]+ s: \d+ deleted/s`).FindStringSubmatch(report)
			require.NotNil(t, m, report)
			require.Equal(t, strconv.Itoa(finished), m[1], "the sweep deletes what the loader made finished and expired:\n%s", report)
			for _, row := range s.left {
				require.Regexp(t, `(?m)^\| `+row+` \|( [0-9.]+ \|){2,3} \w`, report)
			}
			if name == "PostgreSQL" {
				// A deleted or escalated (updated) row leaves a dead tuple,
				// counted once the sweep's statistics are flushed; VACUUM
				// removes them.
				escalated, err := strconv.Atoi(m[2])
				require.NoError(t, err)
				require.Contains(t, report, fmt.Sprintf("| dead tuples | 0 | %d | 0 |", finished+escalated), report)
			}
		})
	}
}

// TestSweep runs the retention benchmark once, briefly, on PostgreSQL.
func TestSweep(t *testing.T) {
	slowtest.Skip(t, slowtest.Scale)
	var out, errOut bytes.Buffer
	db := pgtest.Database(t)
	require.NoError(t, run(t.Context(), []string{"sweep", "--db", db, "--keys", "20000", "--rate", "50", "--clients", "4",
		"--phase", "1s", "--rounds", "1", "--sweep-pause", "50ms", "--sweep-batch", "100"}, &out, &errOut), errOut.String())
	report := out.String()
	require.Contains(t, report, "past their retention", report)
	require.Regexp(t, `\| 1 sweeping \| \d+ \| 0 \|`, report, "no request failed while sweeping")
	require.Contains(t, report, "records/s while sweeping", report)
	require.NotContains(t, report, "swept 0 records/s", report)
}

// TestCommits runs the commit-limit benchmark once, briefly, on each store:
// a row per concurrency with the three ratios of both kinds, and a store
// that holds records refused.
func TestCommits(t *testing.T) {
	slowtest.Skip(t, slowtest.Scale)
	stores := map[string]struct{ db, limit string }{
		"PostgreSQL": {pgtest.Database(t), "pgbench"},
		"SQLite":     {"sqlite:" + filepath.Join(t.TempDir(), "commits.db"), "single writer"},
	}
	cell := `[0-9.]+ / [0-9.]+ / [0-9.]+ \|`
	for name, s := range stores {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := []string{"commits", "--db", s.db, "--clients", "1,2", "--duration", "1s", "--rounds", "1", "--replay-keys", "50"}
			require.NoError(t, run(t.Context(), args, &out, &errOut), errOut.String())
			ratios, _, ok := strings.Cut(out.String(), "Requests per second")
			require.True(t, ok, out.String())
			require.Contains(t, ratios, "| first: engine ÷ "+s.limit+" |", ratios)
			for _, c := range []string{"1", "2"} {
				require.Regexp(t, `(?m)^\| `+c+` \|( `+cell+`){6}$`, ratios)
			}
			require.ErrorContains(t, run(t.Context(), args, &out, &errOut), "not empty")
		})
	}
}
