package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/unstuckhq/unstuck/idem/idemriver"
)

// effectArgs is a job whose key is its idempotency key, delivered twice
// (a webhook delivered twice becomes two jobs).
type effectArgs struct {
	Key string `json:"key"`
}

func (effectArgs) Kind() string { return "faults_effect" }

// IdempotencyKey implements idemriver.Keyed.
func (a effectArgs) IdempotencyKey() (string, string) { return a.Key, scopeName }

// effectWorker counts each run of a key's effect.
type effectWorker struct {
	river.WorkerDefaults[effectArgs]
	eff  *effects
	work time.Duration
}

func (w *effectWorker) Work(ctx context.Context, job *river.Job[effectArgs]) error {
	w.eff.add(job.Args.Key)
	time.Sleep(w.work)
	return nil
}

// fastRetry retries a failed job after 200 ms instead of River's
// polynomial backoff, so that retries happen within the experiment.
type fastRetry struct{}

func (fastRetry) NextRetry(*rivertype.JobRow) time.Time {
	return time.Now().Add(200 * time.Millisecond)
}

// unfinishedJobs counts the jobs River is not done with.
const unfinishedJobs = `SELECT count(*) FROM river_job WHERE state NOT IN ('completed', 'discarded', 'cancelled')`

// jobExperiment: every key is inserted as two jobs (straight to the
// server, so that both exist) and worked by a River client whose pool goes
// through the proxy, with the idemriver middleware on a pgxv5 store behind
// the same proxy. River's own retries and rescues are the callers that
// repeat. The experiment waits until River is done with every job.
func jobExperiment(ctx context.Context, env *pgEnv, sc scale, plan faultPlan, fault faultFunc, log *slog.Logger, policy string) (row, error) {
	r := row{Name: "job-" + plan.name, Path: "River job middleware", Store: "PostgreSQL", Mode: "plain",
		Fault: plan.desc(sc), Keys: sc.httpKeys}
	db, eng, err := env.newEngineDB(ctx, int32(sc.workers*2+10), "", log, policy)
	if err != nil {
		return r, err
	}
	defer db.close()
	migrator, err := rivermigrate.New(riverpgxv5.New(db.direct), nil)
	if err != nil {
		return r, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return r, fmt.Errorf("river migrate: %w", err)
	}
	// idemriver's shortest lease is a minute; River's job timeout is
	// shorter, so that jobs whose completion River lost are rescued within
	// the experiment.
	mw, err := idemriver.New(eng, idemriver.Config{ReleaseAfter: time.Second, Lease: idemriver.MinLease})
	if err != nil {
		return r, err
	}
	eff := newEffects()
	workers := river.NewWorkers()
	river.AddWorker(workers, &effectWorker{eff: eff, work: sc.work})
	client, err := river.NewClient(riverpgxv5.New(db.app), &river.Config{
		FetchCooldown:        10 * time.Millisecond,
		FetchPollInterval:    50 * time.Millisecond,
		JobTimeout:           5 * time.Second,
		RescueStuckJobsAfter: 10 * time.Second,
		Logger:               log,
		Middleware:           []rivertype.Middleware{mw},
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: sc.workers}},
		RetryPolicy:          fastRetry{},
		Workers:              workers,
	})
	if err != nil {
		return r, err
	}
	inserter, err := river.NewClient(riverpgxv5.New(db.direct), &river.Config{Middleware: []rivertype.Middleware{mw}, Logger: log})
	if err != nil {
		return r, err
	}
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		return r, err
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_ = client.Stop(sctx)
		}
	}
	defer stop()

	keys := makeKeys(r.Name, sc.httpKeys)
	do := func(ctx context.Context, key string) bool {
		for range 2 {
			if _, err := inserter.Insert(ctx, effectArgs{Key: key}, nil); err != nil {
				return false // the insert is straight to the server: a real error
			}
		}
		return true
	}
	r.Faults, err = drive(ctx, sc, keys, func(ctx context.Context) (int, error) { return fault(ctx, db.proxy) }, do)
	if err != nil {
		return r, err
	}
	deadline := time.Now().Add(sc.settle)
	left := -1
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if err := db.direct.QueryRow(ctx, unfinishedJobs).Scan(&left); err != nil {
			return r, err
		}
		if left == 0 {
			break
		}
		sleep(ctx, 200*time.Millisecond)
	}
	stop()
	if left != 0 {
		r.Note += fmt.Sprintf(" %d jobs unfinished;", left)
	}
	if err := shutdown(ctx, eng); err != nil {
		r.Note += " shutdown: " + err.Error() + ";"
	}
	r.RanTwice, r.Lost = eff.tally(keys)
	return r, countRecords(ctx, db, &r, eng)
}

var _ idemriver.Keyed = effectArgs{}
