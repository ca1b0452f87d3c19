package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idempgx"
)

// The retention benchmark: how fast the sweep removes expired records on
// PostgreSQL while the applications' first requests go on at a steady
// rate, and what it does to their latency. Phases alternate, quiet (no
// sweep) and sweeping, the same length, the order of each pair rotated;
// every request's latency counts from when it was due (an open loop, so a
// stalled request delays none of the next).

// sweepConfig is one retention benchmark.
type sweepConfig struct {
	Rate       int           // first requests per second, foreground
	Clients    int           // goroutines sending them
	Phase      time.Duration // length of one quiet or sweeping phase
	Rounds     int           // pairs of phases
	SweepBatch int           // records per sweep statement: idem.Config.SweepBatch
	SweepPause time.Duration // pause after each full one: idem.Config.SweepPause
	Sweepers   int           // concurrent sweep loops
}

// phaseResult is one phase's figures.
type phaseResult struct {
	Sweeping          bool
	Requests, Errors  int64
	P50, P99, Max     time.Duration
	Deleted           int64
	Elapsed           time.Duration
	DeadTuples, Bytes int64
}

func runSweep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := fs.String("db", "", "PostgreSQL `URL` of an empty database of its own (required)")
	keys := fs.Int("keys", 10_000_000, "idempotency records to load before measuring")
	expired := fs.Float64("expired", 0.5, "fraction of the loaded records whose retention has ended")
	rate := fs.Int("rate", 300, "foreground first requests per second (open loop)")
	clients := fs.Int("clients", 16, "goroutines sending the foreground requests")
	phase := fs.Duration("phase", 30*time.Second, "length of each quiet and each sweeping phase")
	rounds := fs.Int("rounds", 4, "pairs of phases (quiet, sweeping), the order alternating")
	batch := fs.Int("sweep-batch", idem.DefaultSweepBatch, "records per sweep statement (idem.Config.SweepBatch)")
	pause := fs.Duration("sweep-pause", idem.DefaultSweepPause, "pause after each full sweep statement (idem.Config.SweepPause; negative: none, back to back)")
	sweepers := fs.Int("sweepers", 1, "concurrent sweep loops")
	reuse := fs.Bool("reuse", false, "measure on the records an earlier run loaded (the table is not empty)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: bench sweep --db URL [flags]

Loads --keys records (the ones "bench seed" makes) over two days, the older
--expired share past their retention, then alternates quiet and sweeping
phases while first requests arrive at --rate a second through the engine
(idem.Run on idempgx); the sweep is the engine's Sweep, called again
and again, with --sweep-batch and --sweep-pause as its Config's
SweepBatch and SweepPause. Prints, per phase, the requests' p50/p99/max
latency (from when each was due), the sweep's records per second, the
table's dead tuples and size; then the p99 ratio sweeping ÷ quiet per
round (min / median / max), and a VACUUM's time at the end.

`)
		fs.PrintDefaults()
	}
	if help, err := parseArgs(fs, args, dbURL, stderr); help || err != nil {
		return err
	}
	if *keys < 1 || *expired < 0 || *expired > 1 || *rate < 1 || *clients < 1 || *rounds < 1 || *batch < 1 || *sweepers < 1 || *phase <= 0 {
		fmt.Fprintln(stderr, "bench sweep: --keys, --rate, --clients, --rounds, --sweep-batch, --sweepers and --phase must be positive, --expired in [0, 1]")
		return errUsage
	}
	pool, err := openPool(ctx, *dbURL, *clients+*sweepers+4)
	if err != nil {
		return err
	}
	defer pool.Close()
	s := idempgx.New(pool)
	if err := s.Migrate(ctx); err != nil {
		return err
	}
	if !*reuse {
		if err := requireEmptySQL(ctx, func(q string) (bool, error) {
			var any bool
			return any, pool.QueryRow(ctx, q).Scan(&any)
		}); err != nil {
			return err
		}
		// Two days of records with a retention of (1 - expired) × 2 days:
		// the oldest share is past it.
		span := 48 * time.Hour
		cfg := seedConfig{Keys: *keys, Tenants: 20_000, Span: span, Now: time.Now().UTC(), Parallel: 2, Batch: 20_000, Seed: 1,
			Retention: time.Duration((1 - *expired) * float64(span)), Log: stderr}
		t0 := time.Now()
		if err := newGenerator(cfg).loadKeys(ctx, s, logTo(stderr)); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "loaded %d records in %s\n", *keys, time.Since(t0).Round(time.Second))
		if err := s.Analyze(ctx); err != nil {
			return err
		}
	}
	engine, err := idem.New(s, idem.Config{Secret: []byte("bench-sweep-secret-0123456789abcdef")})
	if err != nil {
		return err
	}
	var live, expiredNow int64
	if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE expires_at <= now()) FROM unstuck_idem_record`).Scan(&live, &expiredNow); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "records %d, past their retention %d; foreground %d first requests/s on %d clients; sweep batch %d, pause %s, %d loop(s)\n\n",
		live, expiredNow, *rate, *clients, *batch, *pause, *sweepers)
	cfg := sweepConfig{Rate: *rate, Clients: *clients, Phase: *phase, Rounds: *rounds, SweepBatch: *batch, SweepPause: *pause, Sweepers: *sweepers}
	sweeper, err := idem.New(s, idem.Config{DisableSealing: true, SweepBatch: cfg.SweepBatch, SweepPause: cfg.SweepPause})
	if err != nil {
		return err
	}
	results, err := sweepRounds(ctx, pool, sweeper, engine, cfg)
	if err != nil {
		return err
	}
	printSweep(stdout, results)
	t0 := time.Now()
	if _, err := pool.Exec(ctx, `VACUUM unstuck_idem_record`); err != nil {
		return err
	}
	dead, size, err := tableState(ctx, pool)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nVACUUM after the run: %s; then %d dead tuples, table and indexes %.1f MiB\n",
		time.Since(t0).Round(time.Millisecond), dead, float64(size)/(1<<20))
	return nil
}

// sweepRounds runs cfg.Rounds pairs of phases, quiet then sweeping in even
// rounds and the other way in odd ones, with the foreground load running
// throughout.
func sweepRounds(ctx context.Context, pool *pgxpool.Pool, sweeper, engine *idem.Engine, cfg sweepConfig) ([]phaseResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fg := startForeground(ctx, engine, cfg)
	defer fg.stop()
	// Load before the first phase, ten seconds or a phase if shorter:
	// connections made, statements prepared, caches warm after the load.
	select {
	case <-time.After(min(10*time.Second, cfg.Phase)):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	fg.take()
	var out []phaseResult
	for round := range cfg.Rounds {
		order := []bool{false, true}
		if round%2 == 1 {
			order = []bool{true, false}
		}
		for _, sweeping := range order {
			r, err := runPhase(ctx, pool, sweeper, fg, cfg, sweeping)
			if err != nil {
				return out, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}

func runPhase(ctx context.Context, pool *pgxpool.Pool, sweeper *idem.Engine, fg *foreground, cfg sweepConfig, sweeping bool) (phaseResult, error) {
	r := phaseResult{Sweeping: sweeping}
	var deleted atomic.Int64
	pctx, cancel := context.WithTimeout(ctx, cfg.Phase)
	defer cancel()
	var (
		wg       sync.WaitGroup
		sweepErr error
		once     sync.Once
	)
	t0 := time.Now()
	fg.take()
	if sweeping {
		for range cfg.Sweepers {
			wg.Go(func() {
				// Sweep returns when the phase ends, or early when a
				// batch is not full: the backlog is gone.
				res, err := sweeper.Sweep(pctx)
				deleted.Add(int64(res.Deleted))
				switch {
				case err != nil && pctx.Err() == nil:
					once.Do(func() { sweepErr = err })
				case err == nil:
					once.Do(func() { sweepErr = errors.New("nothing left to sweep: load more records or run fewer rounds") })
				}
			})
		}
	}
	<-pctx.Done()
	wg.Wait()
	r.Elapsed = time.Since(t0)
	lat, errs := fg.take()
	if sweepErr != nil {
		return r, sweepErr
	}
	if err := ctx.Err(); err != nil {
		return r, err
	}
	r.Requests, r.Errors = int64(len(lat)), errs
	if len(lat) > 0 {
		slices.Sort(lat)
		r.P50, r.P99, r.Max = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)], lat[len(lat)-1]
	}
	r.Deleted = deleted.Load()
	var err error
	r.DeadTuples, r.Bytes, err = tableState(ctx, pool)
	return r, err
}

// tableState is the key table's dead tuples (the statistics collector's
// estimate) and its size with its indexes.
func tableState(ctx context.Context, pool *pgxpool.Pool) (dead, bytes int64, err error) {
	err = pool.QueryRow(ctx, `SELECT coalesce(n_dead_tup, 0), pg_total_relation_size('unstuck_idem_record')
		FROM pg_stat_user_tables WHERE relname = 'unstuck_idem_record'`).Scan(&dead, &bytes)
	return dead, bytes, err
}

// foreground sends first requests through the engine at a fixed rate
// until stopped, keeping each one's latency from when it was due.
type foreground struct {
	mu     sync.Mutex
	lat    []time.Duration
	errs   int64
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startForeground(ctx context.Context, engine *idem.Engine, cfg sweepConfig) *foreground {
	ctx, cancel := context.WithCancel(ctx)
	fg := &foreground{cancel: cancel}
	interval := time.Duration(float64(time.Second) * float64(cfg.Clients) / float64(cfg.Rate))
	var seq atomic.Int64
	start := time.Now()
	for c := range cfg.Clients {
		fg.wg.Go(func() {
			// Client c's requests are due at start + (c/Clients + k) ×
			// interval: the clients together keep the rate.
			due := start.Add(interval * time.Duration(c) / time.Duration(cfg.Clients))
			for {
				if wait := time.Until(due); wait > 0 {
					select {
					case <-time.After(wait):
					case <-ctx.Done():
						return
					}
				} else if ctx.Err() != nil {
					return
				}
				key := "sweep-bench-" + strconv.FormatInt(seq.Add(1), 10)
				_, err := idem.Run(ctx, engine, key, "tenant:bench", func(context.Context) (string, error) { return "ok", nil }, nil)
				took := time.Since(due)
				if ctx.Err() != nil {
					return
				}
				fg.mu.Lock()
				if err != nil {
					fg.errs++
				} else {
					fg.lat = append(fg.lat, took)
				}
				fg.mu.Unlock()
				due = due.Add(interval)
			}
		})
	}
	return fg
}

// take returns the latencies and errors since the last take.
func (fg *foreground) take() ([]time.Duration, int64) {
	fg.mu.Lock()
	defer fg.mu.Unlock()
	lat, errs := fg.lat, fg.errs
	fg.lat, fg.errs = nil, 0
	return lat, errs
}

func (fg *foreground) stop() {
	fg.cancel()
	fg.wg.Wait()
}

func printSweep(w io.Writer, results []phaseResult) {
	fmt.Fprintln(w, "| phase | requests/s | errors | p50 ms | p99 ms | max ms | swept/s | dead tuples | MiB |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	var ratios []float64
	var swept, sweptFor float64
	for i, r := range results {
		name := "quiet"
		if r.Sweeping {
			name = "sweeping"
			swept += float64(r.Deleted)
			sweptFor += r.Elapsed.Seconds()
		}
		fmt.Fprintf(w, "| %d %s | %.0f | %d | %s | %s | %s | %.0f | %d | %.1f |\n", i/2+1, name,
			float64(r.Requests)/r.Elapsed.Seconds(), r.Errors, ms(r.P50), ms(r.P99), ms(r.Max),
			float64(r.Deleted)/r.Elapsed.Seconds(), r.DeadTuples, float64(r.Bytes)/(1<<20))
		if i%2 == 1 {
			quiet, sweep := results[i-1], r
			if quiet.Sweeping {
				quiet, sweep = sweep, quiet
			}
			if quiet.P99 > 0 {
				ratios = append(ratios, float64(sweep.P99)/float64(quiet.P99))
			}
		}
	}
	if len(ratios) > 0 {
		fmt.Fprintf(w, "\np99 sweeping ÷ quiet, per round (min / median / max): %s; swept %.0f records/s while sweeping\n",
			spread(ratios, 2), swept/sweptFor)
	}
}
