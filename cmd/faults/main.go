// Command faults runs Jepsen-style fault experiments against the
// idempotency engine and prints a markdown table of what
// happened: for each experiment, how many keys' effects ran twice, never
// ran, or were left processing or pending.
//
// Every PostgreSQL experiment gets a fresh database on a throwaway cluster
// of its own (initdb and postgres, found as unstucktest/pgtest finds them or
// given with -pg-bin; the shared server is never touched), reached through
// a fault proxy (unstucktest/faultproxy) that restarts, crashes, drops,
// delays, blackholes or cuts statements. Effects are counted outside the
// faulted database: in memory for in-process experiments, in an O_APPEND
// file for experiments that kill the application's process.
//
// Usage:
//
//	go run ./cmd/faults [-scale small|full] [-only name,…] [-pg-bin dir] [-v]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/unstuckhq/unstuck/unstucktest/faultproxy"
)

func main() {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	scaleName := flag.String("scale", "small", "experiment size: small or full")
	only := flag.String("only", "", "comma-separated experiment names or name prefixes to run (default all)")
	pgBin := flag.String("pg-bin", "", "directory of initdb and postgres (default: as unstucktest/pgtest finds it)")
	verbose := flag.Bool("v", false, "log the engine's warnings and errors to stderr")
	list := flag.Bool("list", false, "list the experiments and exit")
	flag.Parse()
	sc, ok := scales[*scaleName]
	if !ok {
		fmt.Fprintf(os.Stderr, "faults: -scale must be small or full, not %q\n", *scaleName)
		os.Exit(2)
	}
	if *list {
		for _, x := range experiments() {
			fmt.Println(x.name)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	h := &harness{sc: sc, pgBin: *pgBin, log: slog.New(slog.NewTextHandler(io.Discard, nil)), progress: os.Stderr}
	if *verbose {
		h.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	defer h.close()
	rows, err := h.run(ctx, selectExperiments(*only, false))
	fmt.Print(table(rows))
	if err != nil {
		fmt.Fprintf(os.Stderr, "faults: %v\n", err)
		os.Exit(1)
	}
}

// experiment is one named experiment. Experiments of the same plan run
// at the same time, under one shared fault when the plan's fault is the
// cluster's. The test runs those marked inTest (all run inside this
// process; the others are the ones that kill processes, and the HTTP
// middleware under RecoverByRerunning, whose contract allows a second run
// after an outage longer than the lease).
type experiment struct {
	name   string
	plan   *faultPlan
	inTest bool
	run    func(ctx context.Context, h *harness, fault faultFunc) ([]row, error)
}

// experiments lists every experiment in the order of the table.
func experiments() []experiment {
	var out []experiment
	for i := range plans {
		p := &plans[i]
		for _, policy := range []string{"", "rerun"} {
			out = append(out, experiment{name: "run-" + p.name + policySuffix(policy), plan: p, inTest: true,
				run: func(ctx context.Context, h *harness, fault faultFunc) ([]row, error) {
					r, err := runExperiment(ctx, h.env, h.sc, *p, fault, h.log, policy)
					return []row{r}, err
				}})
		}
		for _, v := range []struct {
			name   string
			tx     bool
			policy string
		}{{"http-", false, ""}, {"http-", false, "rerun"}, {"httptx-", true, ""}} {
			out = append(out, experiment{name: v.name + p.name + policySuffix(v.policy), plan: p, inTest: v.policy == "",
				run: func(ctx context.Context, h *harness, fault faultFunc) ([]row, error) {
					r, err := httpExperiment(ctx, h.env, h.sc, *p, fault, h.log, v.policy, v.tx)
					return []row{r}, err
				}})
		}
		out = append(out, experiment{name: "job-" + p.name, plan: p, inTest: true,
			run: func(ctx context.Context, h *harness, fault faultFunc) ([]row, error) {
				r, err := jobExperiment(ctx, h.env, h.sc, *p, fault, h.log, "")
				return []row{r}, err
			}})
	}
	out = append(out,
		experiment{name: "sqlite-kill", run: func(ctx context.Context, h *harness, _ faultFunc) ([]row, error) {
			return sqliteKillExperiment(ctx, h.sc)
		}},
		experiment{name: "crash-recovery", run: func(ctx context.Context, h *harness, _ faultFunc) ([]row, error) {
			return crashRecoveryExperiment(ctx, h.env, h.sc)
		}},
	)
	return out
}

// selectExperiments returns the experiments named by only (names or
// prefixes, comma-separated; all when empty), the in-process ones alone
// when inProcess is set.
func selectExperiments(only string, inTest bool) []experiment {
	var out []experiment
	for _, x := range experiments() {
		if inTest && !x.inTest {
			continue
		}
		if only != "" && !slices.ContainsFunc(strings.Split(only, ","), func(s string) bool {
			return s != "" && strings.HasPrefix(x.name, strings.TrimSpace(s))
		}) {
			continue
		}
		out = append(out, x)
	}
	return out
}

// harness runs experiments and owns the PostgreSQL environment.
type harness struct {
	sc       scale
	pgBin    string
	log      *slog.Logger
	env      *pgEnv
	progress io.Writer
}

// run runs xs, those of one plan at the same time, and returns their
// rows; it stops at the first experiment that fails to run (a fault that
// cannot be injected, a database that cannot be set up), which is not a
// finding.
func (h *harness) run(ctx context.Context, xs []experiment) ([]row, error) {
	if len(xs) == 0 {
		return nil, errors.New("no experiment selected (see -list)")
	}
	var rows []row
	for len(xs) > 0 {
		n := 1
		for n < len(xs) && xs[0].plan != nil && xs[n].plan == xs[0].plan {
			n++
		}
		group := xs[:n]
		xs = xs[n:]
		if h.env == nil && group[0].name != "sqlite-kill" {
			env, err := startPG(ctx, h.pgBin)
			if err != nil {
				return rows, fmt.Errorf("start PostgreSQL: %w", err)
			}
			h.env = env
		}
		rs, err := h.runGroup(ctx, group)
		rows = append(rows, rs...)
		if err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// runGroup runs the experiments of one plan at the same time.
func (h *harness) runGroup(ctx context.Context, group []experiment) ([]row, error) {
	start := time.Now()
	names := make([]string, len(group))
	for i, x := range group {
		names[i] = x.name
	}
	fmt.Fprintf(h.progress, "faults: %s …\n", strings.Join(names, ", "))
	// A shared fault starts once every experiment of the group is ready
	// (has asked for it) or has ended, so that none is set up under it.
	var once sync.Once
	var shared struct {
		n   int
		err error
	}
	ready := make(chan struct{})
	var waiting sync.WaitGroup
	waiting.Add(len(group))
	go func() { waiting.Wait(); close(ready) }()
	faultFor := func(arrived *sync.Once) faultFunc {
		p := group[0].plan
		if p == nil {
			return nil
		}
		if !p.shared {
			return func(ctx context.Context, px *faultproxy.Proxy) (int, error) { return p.run(ctx, h.env, px, h.sc) }
		}
		return func(ctx context.Context, _ *faultproxy.Proxy) (int, error) {
			arrived.Do(waiting.Done)
			select {
			case <-ready:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			once.Do(func() { shared.n, shared.err = p.run(ctx, h.env, nil, h.sc) })
			return shared.n, shared.err
		}
	}
	results := make([][]row, len(group))
	errs := make([]error, len(group))
	var wg sync.WaitGroup
	for i, x := range group {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var arrived sync.Once
			defer arrived.Do(waiting.Done)
			results[i], errs[i] = x.run(ctx, h, faultFor(&arrived))
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%s: %w", x.name, errs[i])
			}
		}()
	}
	wg.Wait()
	var rows []row
	for _, rs := range results {
		rows = append(rows, rs...)
		for _, r := range rs {
			fmt.Fprintf(h.progress, "faults: %s: %d faults, %d ran twice, %d lost, %d processing, %d pending, %d unrecorded (%d late), %d two bodies %s\n",
				r.Name, r.Faults, r.RanTwice, r.Lost, r.Processing, r.Pending, r.Unrecorded, r.Late, r.TwoBodies, r.Note)
		}
	}
	fmt.Fprintf(h.progress, "faults: done in %s\n", time.Since(start).Round(100*time.Millisecond))
	return rows, errors.Join(errs...)
}

// close stops the PostgreSQL environment.
func (h *harness) close() {
	if h.env != nil {
		if err := h.env.close(); err != nil {
			fmt.Fprintf(os.Stderr, "faults: stop PostgreSQL: %v\n", err)
		}
		h.env = nil
	}
}

// table renders rows as a markdown table.
func table(rows []row) string {
	var b strings.Builder
	b.WriteString("| experiment | path | store | mode | fault | keys | faults | ran twice | lost | left processing | left pending | unrecorded (recorded late) | two different 2xx bodies | note |\n")
	b.WriteString("|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		keys := fmt.Sprint(r.Keys)
		switch r.Path {
		case "HTTP middleware":
			keys += " × 2 senders"
		case "River job middleware":
			keys += " × 2 jobs"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %d | %d | %d | %d | %d | %d (%d) | %d | %s |\n",
			r.Name, r.Path, r.Store, r.Mode, r.Fault, keys, r.Faults, r.RanTwice, r.Lost, r.Processing, r.Pending,
			r.Unrecorded, r.Late, r.TwoBodies, r.Note)
	}
	return b.String()
}
