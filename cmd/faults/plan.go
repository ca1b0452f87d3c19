package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/unstuckhq/unstuck/unstucktest/faultproxy"
	"github.com/unstuckhq/unstuck/unstucktest/idemsql"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

// scale sizes the experiments.
type scale struct {
	name       string
	runKeys    int           // keys of a Run experiment
	httpKeys   int           // keys of an HTTP experiment (two senders each)
	workers    int           // concurrent workers
	window     time.Duration // how long faults are injected while keys are issued
	lease      time.Duration // lease of every run
	down       time.Duration // how long PostgreSQL stays down in a restart
	delay      time.Duration // the delay of the delay experiment
	blackhole  time.Duration // the blackhole's length
	settle     time.Duration // after the window: how long callers may still retry
	work       time.Duration // the effect's own duration
	sqliteRun  int           // SQLite writer kills
	sqliteKeys int           // keys of the SQLite experiment
	// crashLease is the lease of the crash-recovery experiment; 0 is
	// idem.DefaultLease.
	crashLease time.Duration
}

var scales = map[string]scale{
	"small": {name: "small", runKeys: 160, httpKeys: 60, workers: 8, window: 2 * time.Second,
		lease: 2 * time.Second, down: 300 * time.Millisecond, delay: time.Second, blackhole: 6 * time.Second,
		settle: 20 * time.Second, work: 2 * time.Millisecond, sqliteRun: 5, sqliteKeys: 400, crashLease: 2 * time.Second},
	"full": {name: "full", runKeys: 3200, httpKeys: 1200, workers: 8, window: 40 * time.Second,
		lease: 5 * time.Second, down: 5 * time.Second, delay: 2 * time.Second, blackhole: 30 * time.Second,
		settle: 90 * time.Second, work: 5 * time.Millisecond, sqliteRun: 30, sqliteKeys: 3000},
}

// faultPlan injects one kind of fault for the window, on the cluster
// (shared: every experiment running at the time sees it) or on one
// experiment's proxy, and returns the number of faults injected. It must
// leave every fault off when it returns.
type faultPlan struct {
	name   string
	shared bool // the fault is the cluster's: run once for a group of experiments
	desc   func(sc scale) string
	run    func(ctx context.Context, env *pgEnv, p *faultproxy.Proxy, sc scale) (int, error)
}

// plans are the PostgreSQL faults, in the order of the table.
var plans = []faultPlan{
	{
		name: "restart", shared: true,
		desc: func(sc scale) string {
			return fmt.Sprintf("PostgreSQL restarted: fast ×2, immediate ×1, down %s each", sc.down)
		},
		run: func(ctx context.Context, env *pgEnv, p *faultproxy.Proxy, sc scale) (int, error) {
			return restarts(ctx, env, sc, pgtest.StopFast, pgtest.StopFast, pgtest.StopImmediate)
		},
	},
	{
		name: "kill9", shared: true,
		desc: func(sc scale) string {
			return fmt.Sprintf("kill -9 of the postmaster ×2, down %s each", sc.down)
		},
		run: func(ctx context.Context, env *pgEnv, p *faultproxy.Proxy, sc scale) (int, error) {
			return restarts(ctx, env, sc, pgtest.StopKill, pgtest.StopKill)
		},
	},
	{
		name: "drops",
		desc: func(scale) string { return "random connection drops (p = 0.01 per message)" },
		run: func(ctx context.Context, env *pgEnv, p *faultproxy.Proxy, sc scale) (int, error) {
			p.SetDropProbability(0.01)
			sleep(ctx, sc.window)
			p.Clear()
			return int(p.Stats().RandomDrops), nil
		},
	},
	{
		name: "cut-before",
		desc: func(scale) string { return "completion statement cut before PostgreSQL (p = 0.3)" },
		run:  cut(false),
	},
	{
		name: "cut-after",
		desc: func(scale) string { return "completion statement cut after PostgreSQL committed (p = 0.3)" },
		run:  cut(true),
	},
	{
		name: "delay",
		desc: func(sc scale) string { return fmt.Sprintf("%s delays (p = 0.02 per message)", sc.delay) },
		run: func(ctx context.Context, env *pgEnv, p *faultproxy.Proxy, sc scale) (int, error) {
			p.SetDelay(sc.delay, 0.02)
			sleep(ctx, sc.window)
			p.Clear()
			return int(p.Stats().Delayed), nil
		},
	},
	{
		name: "blackhole",
		desc: func(sc scale) string {
			return fmt.Sprintf("%s blackhole (sockets open, nothing forwarded)", sc.blackhole)
		},
		run: func(ctx context.Context, env *pgEnv, p *faultproxy.Proxy, sc scale) (int, error) {
			sleep(ctx, sc.window/3)
			p.SetBlackhole(true)
			sleep(ctx, sc.blackhole)
			p.Clear()
			sleep(ctx, sc.window/3)
			return 1, nil
		},
	},
}

// restarts brings PostgreSQL down and up once per mode, spread over the
// window.
func restarts(ctx context.Context, env *pgEnv, sc scale, modes ...string) (int, error) {
	gap := sc.window / time.Duration(len(modes)+1)
	n := 0
	for _, m := range modes {
		sleep(ctx, gap)
		if err := env.cluster.Restart(context.WithoutCancel(ctx), m, sc.down); err != nil {
			return n, fmt.Errorf("restart %s: %w", m, err)
		}
		n++
	}
	sleep(ctx, gap)
	return n, nil
}

// cut cuts the completion statement for the window.
func cut(after bool) func(ctx context.Context, env *pgEnv, p *faultproxy.Proxy, sc scale) (int, error) {
	return func(ctx context.Context, env *pgEnv, p *faultproxy.Proxy, sc scale) (int, error) {
		p.SetCut(&faultproxy.Cut{Match: idemsql.IsCompletion, After: after, P: 0.3})
		sleep(ctx, sc.window)
		p.Clear()
		st := p.Stats()
		return int(st.CutBefore + st.CutAfter), nil
	}
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// effects counts, outside the faulted database, how often each key's
// effect ran.
type effects struct {
	mu sync.Mutex
	n  map[string]int
}

func newEffects() *effects { return &effects{n: map[string]int{}} }

// add records one run of key's effect.
func (e *effects) add(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n[key]++
}

// tally returns the keys run more than once and never run, of keys.
func (e *effects) tally(keys []string) (twice, lost int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, k := range keys {
		switch n := e.n[k]; {
		case n > 1:
			twice++
		case n == 0:
			lost++
		}
	}
	return twice, lost
}
