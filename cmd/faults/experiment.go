package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/unstucktest/faultproxy"
)

// row is one line of the results table.
type row struct {
	Name       string
	Path       string // "idem.Run", "HTTP middleware", …
	Store      string // "PostgreSQL", "SQLite"
	Mode       string // "plain" or "transactional"
	Fault      string
	Keys       int
	Faults     int
	RanTwice   int // keys whose effect ran more than once
	Lost       int // keys whose effect never ran
	Processing int // records left processing after the settle
	Pending    int // records left pending after the settle
	Unrecorded int // runs that returned ErrOutcomeUnrecorded
	Late       int // of those, keys whose record was completed later
	TwoBodies  int // HTTP keys whose two senders got different 2xx bodies
	Note       string
}

// secret seals results; the harness's own, never a real one.
var secret = []byte("faults-harness-secret-0123456789")

const scopeName = "faults"

// newEngine builds the engine every experiment uses: the default options,
// the lease of the scale and the recovery policy.
func newEngine(s idemdriver.Store, log *slog.Logger, policy string) (*idem.Engine, error) {
	return idem.New(s, idem.Config{Secret: secret, Logger: log, DefaultRecovery: recoveryOf(policy)})
}

// newEngineDB returns a fresh database (see newDatabase) and an engine over
// its store through the proxy.
func (e *pgEnv) newEngineDB(ctx context.Context, maxConns int32, schema string, log *slog.Logger, policy string) (*database, *idem.Engine, error) {
	db, err := e.newDatabase(ctx, maxConns, schema)
	if err != nil {
		return nil, nil, err
	}
	eng, err := newEngine(db.store, log, policy)
	if err != nil {
		db.close()
		return nil, nil, err
	}
	return db, eng, nil
}

// makeKeys returns n keys unique to the experiment.
func makeKeys(exp string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-key-%06d", exp, i)
	}
	return keys
}

// faultFunc injects an experiment's faults, given its proxy, and returns
// how many it injected.
type faultFunc func(ctx context.Context, p *faultproxy.Proxy) (int, error)

// drive issues keys at an even pace over the window to sc.workers workers
// that each call do(key) until it reports done or the deadline passes, and
// runs the fault plan alongside. It returns the number of faults injected.
func drive(ctx context.Context, sc scale, keys []string, fault func(ctx context.Context) (int, error), do func(ctx context.Context, key string) (done bool)) (int, error) {
	deadline := time.Now().Add(sc.window + sc.settle)
	var faults int
	var ferr error
	fdone := make(chan struct{})
	go func() {
		defer close(fdone)
		faults, ferr = fault(ctx)
	}()

	ch := make(chan string)
	var wg sync.WaitGroup
	for range sc.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for key := range ch {
				for !do(ctx, key) && time.Now().Before(deadline) && ctx.Err() == nil {
				}
			}
		}()
	}
	pace := sc.window / time.Duration(len(keys))
	next := time.Now()
	for _, k := range keys {
		sleep(ctx, time.Until(next))
		next = next.Add(pace)
		select {
		case ch <- k:
		case <-ctx.Done():
		}
	}
	close(ch)
	wg.Wait()
	<-fdone
	return faults, ferr
}

// retryPause is how long a caller waits before repeating after an error.
func retryPause(err error) time.Duration {
	var ip *idem.InProgressError
	if errors.As(err, &ip) {
		return min(ip.RetryAfter, 200*time.Millisecond)
	}
	return 100 * time.Millisecond
}

// runExperiment: sc.workers workers call idem.Run for every key on a
// pgxv5 store through the proxy while plan injects its faults; a caller
// that gets an error repeats the call, as an application retrying would,
// until it gets a value, a pending record or an unavailable result.
func runExperiment(ctx context.Context, env *pgEnv, sc scale, plan faultPlan, fault faultFunc, log *slog.Logger, policy string) (row, error) {
	r := row{Name: "run-" + plan.name + policySuffix(policy), Path: "idem.Run", Store: "PostgreSQL", Mode: modeName("plain", policy),
		Fault: plan.desc(sc), Keys: sc.runKeys}
	db, eng, err := env.newEngineDB(ctx, int32(sc.workers*2), "", log, policy)
	if err != nil {
		return r, err
	}
	defer db.close()
	eff := newEffects()
	keys := makeKeys(r.Name, sc.runKeys)
	do := func(ctx context.Context, key string) bool {
		_, err := idem.Run(ctx, eng, key, scopeName, func(context.Context) (string, error) {
			eff.add(key)
			time.Sleep(sc.work)
			return "value of " + key, nil
		}, &idem.RunOpts{Lease: sc.lease})
		var ip *idem.InProgressError
		switch {
		case err == nil:
			return true
		case isUnrecorded(err): // the effect ran and the caller has its value
			return true
		case errors.As(err, &ip) && ip.Status == idemdriver.StatusPending, errors.Is(err, idem.ErrResultUnavailable):
			return true
		}
		sleep(ctx, retryPause(err))
		return false
	}
	r.Faults, err = drive(ctx, sc, keys, func(ctx context.Context) (int, error) { return fault(ctx, db.proxy) }, do)
	if err != nil {
		return r, err
	}
	if err := shutdown(ctx, eng); err != nil {
		r.Note = "shutdown: " + err.Error()
	}
	r.RanTwice, r.Lost = eff.tally(keys)
	return r, countRecords(ctx, db, &r, eng)
}

// modeName is the mode column: the mode, and the recovery policy unless
// it is the engine's default.
func modeName(mode, policy string) string {
	if policy == "" {
		return mode
	}
	return mode + ", recovery " + policy
}

// countRecords fills the record columns of r from the database and the
// late-recording columns from the engine's counters.
func countRecords(ctx context.Context, db *database, r *row, eng *idem.Engine) error {
	counts, err := db.recordCounts(ctx)
	if err != nil {
		return err
	}
	r.Processing, r.Pending = counts["processing"], counts["pending"]
	var givenUp, escalated int
	r.Unrecorded, r.Late, givenUp, escalated = lateCounts(eng)
	if givenUp > 0 {
		r.Note += fmt.Sprintf(" %d recordings given up;", givenUp)
	}
	if escalated > 0 {
		r.Note += fmt.Sprintf(" %d abandoned records escalated;", escalated)
	}
	return nil
}
