package ops_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

	engine, bulks := bulkBench(b, url, ops.BulkConfig{Approval: ops.Approval{}, Cap: 200000, Batch: batch, Pause: pause})

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
				_, err := idem.Run(ctx, engine, key, "bench:load", func(context.Context) (int, error) { return 1, nil }, nil)
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

// bulkBench opens the seeded database at url (closed when b ends) and
// returns its engine and an ops.Bulks of cfg on it.
func bulkBench(b *testing.B, url string, cfg ops.BulkConfig) (*idem.Engine, *ops.Bulks[pgx.Tx]) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	s := idempgx.New(pool)
	cdb := store.NewPostgres(pool)
	require.NoError(b, cdb.Migrate(ctx))
	trail := audit.NewPostgres(pool, audit.WithKeys(testAuditKeys))
	require.NoError(b, trail.Migrate(ctx))
	engine, err := idem.New(s, idem.Config{Secret: []byte("ops-test-secret-0123456789abcdefgh")})
	require.NoError(b, err)
	d, err := ops.Postgres(pool, trail, cdb, nil)
	require.NoError(b, err)
	keys, err := ops.NewKeys(d, engine, s, s)
	require.NoError(b, err)
	bulks, err := ops.NewBulks(ops.BulkParts[pgx.Tx]{Store: cdb, Keys: keys, KeyList: s}, cfg)
	require.NoError(b, err)
	return engine, bulks
}

// BenchmarkBulkPreviewBound is the measurement of BENCHMARKS.md, "Previews
// are bounded", on the database of UNSTUCK_BULK_BENCH_DB, seeded by "bench
// seed". It only reads it: a preview cut at its bound, over the cap or
// with no legal item freezes nothing. With the default Cap and
// PreviewTimeout it times previews (Freeze) of two filters. The slow one
// is a forget of every completed key without the keys whose effect may
// have happened: every completed key is such a key, so none is legal and
// the scan cannot stop at the cap. The quick one is a forget of every key
// of UNSTUCK_BULK_BENCH_CAP_SCOPE (default tenant:00000) with those keys
// included, which stops at the cap. Rounds: a slow one alone; a quick one
// alone; four slow ones by four people beside a quick one by a fifth; four
// slow ones by one person, of which two are refused at once. Run it once
// with -bench BenchmarkBulkPreviewBound -benchtime 1x; it reports Markdown.
func BenchmarkBulkPreviewBound(b *testing.B) {
	t := b // one run that reports its own figures; b.N is not used
	url := os.Getenv("UNSTUCK_BULK_BENCH_DB")
	if url == "" {
		t.Skip("set UNSTUCK_BULK_BENCH_DB to a seeded database to measure bounded previews")
	}
	ctx := context.Background()
	capScope := os.Getenv("UNSTUCK_BULK_BENCH_CAP_SCOPE")
	if capScope == "" {
		capScope = "tenant:00000"
	}
	_, bulks := bulkBench(b, url, ops.BulkConfig{Approval: ops.Approval{}})
	cfg := bulks.Config()

	slow := ops.BulkSpec{Kind: ops.BulkKeys, Action: "forget", KeyFilter: idemdriver.KeyFilter{Status: idemdriver.StatusCompleted},
		FilterQuery: "status=completed"}
	capped := ops.BulkSpec{Kind: ops.BulkKeys, Action: "forget", KeyFilter: idemdriver.KeyFilter{Scope: capScope},
		FilterQuery: "scope=" + capScope, IncludeMayHaveHappened: true}
	type preview struct {
		phase, actor, filter string
		spec                 ops.BulkSpec
		took                 time.Duration
		answer               string
	}
	answer := func(req store.Bulk, p ops.BulkPreview, err error) string {
		var slowErr *ops.PreviewTooSlowError
		switch {
		case errors.As(err, &slowErr):
			return fmt.Sprintf("too slow (PreviewTooSlowError): read %d matching keys in %v", slowErr.Scanned, slowErr.Bound)
		case errors.Is(err, ops.ErrTooManyPreviews):
			return "ErrTooManyPreviews"
		case err != nil:
			return "error: " + err.Error()
		case p.OverCap:
			return fmt.Sprintf("over the cap: more than %d legal (read %d keys)", p.Cap, p.Scanned)
		}
		return fmt.Sprintf("%d legal, %d may have happened (left out), %d not legal; read %d keys; draft %d",
			p.Legal, p.MayHaveHappened, p.NotLegalTotal(), p.Scanned, req.ID)
	}
	// run starts the previews at once and waits for all of them.
	run := func(ps []*preview) {
		var wg sync.WaitGroup
		for _, p := range ps {
			wg.Go(func() {
				start := time.Now()
				req, got, err := bulks.Freeze(ctx, ops.Actor{Username: p.actor, Role: "oncall"}, p.spec)
				p.took = time.Since(start)
				p.answer = answer(req, got, err)
			})
		}
		wg.Wait()
	}
	var all []*preview
	add := func(phase string, n int, actor func(i int) string, filter string, spec ops.BulkSpec) []*preview {
		var ps []*preview
		for i := range n {
			p := &preview{phase: phase, actor: actor(i), filter: filter, spec: spec}
			ps, all = append(ps, p), append(all, p)
		}
		return ps
	}
	person := func(i int) string { return fmt.Sprintf("bench-%d", i+1) }
	one := func(int) string { return "bench-1" }
	run(add("alone", 1, one, slow.FilterQuery, slow))
	run(add("alone", 1, one, capped.FilterQuery+" (may have happened included)", capped))
	run(append(add("4 people at once, + 1 at the cap", 4, person, slow.FilterQuery, slow),
		add("4 people at once, + 1 at the cap", 1, func(int) string { return "bench-5" }, capped.FilterQuery+" (may have happened included)", capped)...))
	run(add("1 person, 4 at once", 4, one, slow.FilterQuery, slow))

	var out strings.Builder
	fmt.Fprintf(&out, "\ncap %d, preview timeout %v, %d previews at once per person\n\n", cfg.Cap, cfg.PreviewTimeout, ops.MaxPreviewsPerUser)
	out.WriteString("| previews | actor | filter (action forget) | answered after | answer |\n|---|---|---|---:|---|\n")
	for _, p := range all {
		fmt.Fprintf(&out, "| %s | %s | %s | %.2f s | %s |\n", p.phase, p.actor, p.filter, p.took.Seconds(), p.answer)
	}
	t.Log(out.String())
}
