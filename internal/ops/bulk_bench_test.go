package ops_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idempgx"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
)

// BenchmarkBulkScale is the measurement of BENCHMARKS.md, "Bulk forget
// while the engine serves": a benchmark, so that the test suite never runs
// (or skips) it; run it once with -bench BenchmarkBulkScale -benchtime 1x
// and UNSTUCK_BULK_BENCH_DB, the URL of a
// database seeded by "bench seed" (it forgets the keys it matches). It
// measures the engine's own request rate and latency (Run of fresh keys
// by UNSTUCK_BULK_BENCH_CLIENTS goroutines, default 4) for 20 s alone,
// then while a bulk forget of every key of UNSTUCK_BULK_BENCH_SCOPE
// (default tenant:00008) runs with UNSTUCK_BULK_BENCH_BATCH (500) and
// UNSTUCK_BULK_BENCH_PAUSE (0), and reports both as Markdown.
func BenchmarkBulkScale(b *testing.B) {
	t := b // one run that reports its own figures; b.N is not used
	url := os.Getenv("UNSTUCK_BULK_BENCH_DB")
	if url == "" {
		t.Skip("set UNSTUCK_BULK_BENCH_DB to a seeded database of its own to measure a bulk run")
	}
	ctx := context.Background()
	env := func(name, def string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return def
	}
	scope := env("UNSTUCK_BULK_BENCH_SCOPE", "tenant:00008")
	batch, err := strconv.Atoi(env("UNSTUCK_BULK_BENCH_BATCH", "500"))
	require.NoError(t, err)
	pause, err := time.ParseDuration(env("UNSTUCK_BULK_BENCH_PAUSE", "0s"))
	require.NoError(t, err)
	clients, err := strconv.Atoi(env("UNSTUCK_BULK_BENCH_CLIENTS", "4"))
	require.NoError(t, err)

	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	s := idempgx.New(pool)
	cdb := store.NewPostgres(pool)
	require.NoError(t, cdb.Migrate(ctx))
	trail := audit.NewPostgres(pool, audit.WithKeys(testAuditKeys))
	require.NoError(t, trail.Migrate(ctx))
	engine, err := idem.New(s, idem.WithSecret([]byte("ops-test-secret-0123456789abcdefgh")))
	require.NoError(t, err)
	d, err := ops.Postgres(pool, trail)
	require.NoError(t, err)
	keys, err := ops.NewKeys(d, engine, s.Tx, s)
	require.NoError(t, err)
	bulks, err := ops.NewBulks(cdb, keys, s, nil, nil, ops.BulkConfig{Approval: ops.Approval{}, Cap: 200000, Batch: batch, Pause: pause})
	require.NoError(t, err)

	// The engine's own requests: fresh keys, reserve and complete.
	var (
		mu      sync.Mutex
		phase   = "alone"
		samples = map[string][]time.Duration{}
		seq     atomic.Int64
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("bulk-bench-%d-%d", time.Now().UnixNano(), seq.Add(1))
				start := time.Now()
				_, err := idem.Run(ctx, engine, key, "bench:load", func(context.Context) (int, error) { return 1, nil })
				took := time.Since(start)
				if err != nil {
					t.Errorf("engine request: %v", err)
					return
				}
				mu.Lock()
				samples[phase] = append(samples[phase], took)
				mu.Unlock()
			}
		})
	}
	setPhase := func(p string) {
		mu.Lock()
		phase = p
		mu.Unlock()
	}
	time.Sleep(20 * time.Second)
	setPhase("preview")

	spec := ops.BulkSpec{Kind: ops.BulkKeys, Action: "forget", KeyFilter: idemdriver.KeyFilter{Scope: scope}, FilterQuery: "scope=" + scope, IncludeMayHaveHappened: true}
	// The preview freezes the set (items recorded with COPY); the submit
	// confirms its count.
	bench := ops.Actor{Username: "bench", Role: "oncall"}
	start := time.Now()
	draft, p, err := bulks.Freeze(ctx, bench, spec)
	require.NoError(t, err)
	previewTook := time.Since(start)
	start = time.Now()
	req, err := bulks.Submit(ctx, bench, draft.ID, "bulk forget measurement", draft.Total)
	require.NoError(t, err)
	requestTook := time.Since(start)

	setPhase("bulk")
	start = time.Now()
	for {
		done, err := bulks.Run(ctx, req.ID, 20*time.Second)
		require.NoError(t, err)
		if done {
			break
		}
	}
	runTook := time.Since(start)
	setPhase("after")
	close(stop)
	wg.Wait()

	got, _, err := bulks.Get(ctx, req.ID)
	require.NoError(t, err)
	require.Equal(t, store.BulkDone, got.Status)
	stats := func(name string, wall time.Duration) string {
		xs := slices.Clone(samples[name])
		slices.Sort(xs)
		if len(xs) == 0 {
			return "| " + name + " | 0 | | | |"
		}
		q := func(f float64) time.Duration { return xs[min(len(xs)-1, int(f*float64(len(xs))))] }
		return fmt.Sprintf("| %s | %d | %.0f | %.2f | %.2f |", name, len(xs), float64(len(xs))/wall.Seconds(),
			float64(q(0.5).Microseconds())/1000, float64(q(0.99).Microseconds())/1000)
	}
	t.Logf("\nscope %s: %d legal, %d not legal; batch %d, pause %v, %d engine clients\n"+
		"freeze (preview and items recorded) %v, submit %v, run %v: %.0f items/s; counts %v\n\n"+
		"| engine requests | n | req/s | p50 ms | p99 ms |\n|---|---:|---:|---:|---:|\n%s\n%s\n",
		scope, p.Legal, p.NotLegalTotal(), batch, pause, clients, previewTook.Round(time.Millisecond), requestTook.Round(time.Millisecond),
		runTook.Round(time.Millisecond), float64(got.Total)/runTook.Seconds(), got.Counts, stats("alone", 20*time.Second), stats("bulk", runTook))
}
