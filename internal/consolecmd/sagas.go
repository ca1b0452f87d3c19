package consolecmd

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"

	"github.com/unstuckhq/unstuck/decision"
	"github.com/unstuckhq/unstuck/idem/idemriver"
	"github.com/unstuckhq/unstuck/internal/demo"
	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/saga/sagapgx"
	"github.com/unstuckhq/unstuck/saga/sagasqlite"
)

// sagaSettings are what the demo's River client and saga runner may be
// given besides the defaults. Only the crash test sets them (in a worker
// process of its own, before calling run).
type sagaSettings struct {
	// workspaces replaces the in-process workspace provider.
	workspaces demo.WorkspaceAPI
	// stepTimeout replaces the Timeout of every step, and so their lease
	// (saga.Runner.StepLease): River's recovery knobs follow from it.
	stepTimeout time.Duration
}

var sagaOverrides sagaSettings

// startSagas runs the demo's signups as an application would: the saga
// engine's and the signups' migrations in the demo's database, a River
// client working the saga queue on the applications' River tables (the
// leader there, with the saga's periodic jobs), and the saga runner. It
// returns the routes to mount next to the shop's and stop, which stops
// River (waiting for running jobs, then cancelling them) and must be
// called before the database closes. The console's decisions are wired
// apart, as "console serve" wires them (operationDecisions).
func startSagas(ctx context.Context, db *database, shop *demo.Shop, log *slog.Logger) (mount func(chi.Router), stop func(), err error) {
	if db.MySQL != nil {
		return nil, nil, errNoSagasOnMySQL
	}
	set := sagaOverrides
	var sdb demo.SignupDB = sqlSignupDB{db.SQL}
	if db.Pool != nil {
		sdb = pgxSignupDB{db.Pool}
	}
	ws := set.workspaces
	if ws == nil {
		if ws, err = demoWorkspaces(ctx, sdb); err != nil {
			return nil, nil, err
		}
	}
	signups := demo.NewSignups(shop, sdb, ws, log)
	// The shop's verifier of payments, for the console's "Verify with the
	// provider" (SPEC K19), registered as an application registers its own.
	verify := idemriver.NewVerifyWorker(10 * time.Second)
	if err := verify.Register(demo.PaymentOperation, "demo payment provider", shop.Provider().PaymentVerifier()); err != nil {
		return nil, nil, err
	}
	if err := verify.Register(demo.SignupOperation, "demo signups", signups.Verifier()); err != nil {
		return nil, nil, err
	}
	if db.Pool != nil {
		if stop, err = runSagas(ctx, riverpgxv5.New(db.Pool), sagapgx.New(db.Pool), signups, verify, shop.DecisionWorker(), set, log); err != nil {
			return nil, nil, err
		}
		return signups.Routes, stop, nil
	}
	// River's SQLite driver wants a handle of its own with one
	// connection; the saga records share it so that they commit with
	// River's jobs. BEGIN IMMEDIATE takes the write lock up front, so that
	// a transaction that reads then writes never fails on a snapshot made
	// stale by a writer on the other handle.
	if stop, err = runSagas(ctx, riversqlite.New(db.Immediate), sagasqlite.New(db.Immediate), signups, verify, shop.DecisionWorker(), set, log); err != nil {
		return nil, nil, err
	}
	return signups.Routes, stop, nil
}

// demoWorkspaces is the demo's workspace provider. Its state is in the
// demo's database, so that a restarted demo finds the workspaces it made
// and reconciliation finds no difference that a restart made up.
func demoWorkspaces(ctx context.Context, sdb demo.SignupDB) (demo.WorkspaceAPI, error) {
	return demo.NewWorkspaceProviderDB(ctx, sdb)
}

func runSagas[TTx any](ctx context.Context, rd riverdriver.Driver[TTx], sd sagadriver.Driver[TTx], signups *demo.Signups, verify *idemriver.VerifyWorker, decisions *decision.Worker, set sagaSettings, log *slog.Logger) (stop func(), err error) {
	if err := signups.Migrate(ctx); err != nil {
		return nil, err
	}
	def := signups.Definition()
	if set.stepTimeout > 0 {
		for i := range def.Steps {
			def.Steps[i].Timeout = set.stepTimeout
		}
	}
	runner, err := saga.NewRunner(sd, saga.Config{Definitions: []saga.Definition{def}, Logger: log})
	if err != nil {
		return nil, err
	}
	workers := river.NewWorkers()
	if err := runner.AddWorkers(workers); err != nil {
		return nil, err
	}
	cfg := &river.Config{
		FetchPollInterval: 250 * time.Millisecond,
		Logger:            log.With("component", "river"),
		PeriodicJobs:      runner.PeriodicJobs(),
		Queues:            map[string]river.QueueConfig{saga.QueueDefault: {MaxWorkers: 10}},
		Workers:           workers,
	}
	// JobTimeout and RescueStuckJobsAfter from the steps' leases: a step
	// of a killed process resumes in minutes, not River's hour.
	if err := runner.ConfigureRiver(cfg); err != nil {
		return nil, err
	}
	if err := idemriver.AddVerifyWorker(workers, cfg, verify); err != nil {
		return nil, err
	}
	// The shop's handler of the console's decision events, on the queue
	// the console inserts them on.
	if err := river.AddWorkerSafely(workers, decisions); err != nil {
		return nil, err
	}
	cfg.Queues[decision.DefaultQueue] = river.QueueConfig{MaxWorkers: 2}
	client, err := river.NewClient(rd, cfg)
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	runner.SetClient(client)
	demo.UseRunner(signups, runner)
	// Not ctx: River stops when stop says, after the HTTP server, before
	// the database closes.
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("start river: %w", err)
	}
	return stopRiver(client, log), nil
}

// stopRiver returns the stop of client: waiting up to 10 s for its
// running jobs, then cancelling them.
func stopRiver[TTx any](client *river.Client[TTx], log *slog.Logger) func() {
	return func() {
		soft, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := client.Stop(soft); err == nil {
			return
		}
		log.Warn("river did not stop in 10s: cancelling its running jobs")
		hard, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := client.StopAndCancel(hard); err != nil {
			log.Error("river did not stop", "error", err.Error())
		}
	}
}

// pgxSignupDB runs the signups' SQL on the pool.
type pgxSignupDB struct{ pool *pgxpool.Pool }

func (d pgxSignupDB) Exec(ctx context.Context, query string, args ...any) error {
	_, err := d.pool.Exec(ctx, query, args...)
	return err
}

func (d pgxSignupDB) QueryRow(ctx context.Context, query string, args []any, dest ...any) (bool, error) {
	err := d.pool.QueryRow(ctx, query, args...).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// sqlSignupDB runs the signups' SQL on SQLite, $n becoming ?n.
type sqlSignupDB struct{ db *sql.DB }

var dollarParam = regexp.MustCompile(`\$(\d+)`)

func rebind(q string) string { return dollarParam.ReplaceAllString(q, "?$1") }

func (d sqlSignupDB) Exec(ctx context.Context, query string, args ...any) error {
	_, err := d.db.ExecContext(ctx, rebind(query), args...)
	return err
}

func (d sqlSignupDB) QueryRow(ctx context.Context, query string, args []any, dest ...any) (bool, error) {
	err := d.db.QueryRowContext(ctx, rebind(query), args...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}
