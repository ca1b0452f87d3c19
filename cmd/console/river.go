package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/migrate"
	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/saga/sagapgx"
	"github.com/unstuckhq/unstuck/saga/sagasqlite"
)

// The console uses River in two ways, kept apart so that it never takes
// an application's River duties (River v0.51.2):
//
//   - Its own durable work (bulk runs) runs on River tables of its own: on
//     PostgreSQL in the schema [consoleRiverSchema] (river.Config.Schema:
//     "All table references in database queries will use this value as a
//     prefix"), on SQLite in a file of its own beside the database
//     ([consoleRiverFile]). Its leader election, job rescuer, scheduler and
//     cleaner touch only those tables.
//   - The jobs a decision inserts for the applications (a retried step, a
//     compensation) go through an insert-only client on the applications'
//     tables: no Workers and no Queues, never started. River builds an
//     elector and maintenance services only for a client that works
//     queues ("Indicates whether with the given configuration, this client
//     will be expected to execute jobs … Executing jobs requires a set of
//     configured queues"), and checks a kind against the Workers bundle
//     only when there is one ("This validation is skipped if the client is
//     configured as an insert-only (with no workers)"). So the console is
//     never the applications' River leader, whose rescuer, periodic jobs
//     and settings stay the applications'.

// consoleRiverSchema is the PostgreSQL schema of the console's own River
// tables, created by "console migrate".
const consoleRiverSchema = "unstuck_console"

// consoleRiverFile is the SQLite file of the console's own River tables
// beside the database file path. It holds only the jobs that drive bulk
// runs, whose state is in the database itself: a console that finds it
// missing makes a new one and resumes the running requests.
func consoleRiverFile(path string) string { return path + "-console-river" }

// riverMigrate applies River's migrations with rd in schema ("" is the
// search path's), or under migrate.CheckOnly reports those not applied
// as a *migrate.BehindError of line.
func riverMigrate[TTx any](ctx context.Context, rd riverdriver.Driver[TTx], schema, line string) error {
	m, err := rivermigrate.New(rd, &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler), Schema: schema})
	if err != nil {
		return fmt.Errorf("%s: migrate: %w", line, err)
	}
	if migrate.Checking(ctx) {
		res, err := m.Validate(ctx, nil)
		if err != nil {
			return fmt.Errorf("%s: check migrations: %w", line, err)
		}
		if !res.OK {
			return &migrate.BehindError{Line: line, Pending: res.Messages}
		}
		return nil
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("%s: migrate: %w", line, err)
	}
	return nil
}

// riverMigrateSQLite is riverMigrate of the applications' River tables in
// db's file: through a handle of its own that takes the write lock up
// front (ops.OpenImmediate) when it migrates, on db when it only checks.
func riverMigrateSQLite(db *sql.DB) func(context.Context) error {
	return func(ctx context.Context) error {
		if migrate.Checking(ctx) {
			return riverMigrate(ctx, riversqlite.New(db), "", "river")
		}
		riverDB, err := ops.OpenImmediate(ctx, db)
		if err != nil {
			return fmt.Errorf("river: migrate: %w", err)
		}
		defer closeQuietly(riverDB)
		return riverMigrate(ctx, riversqlite.New(riverDB), "", "river")
	}
}

// consoleRiverLine is the migration line of the console's own River
// tables in messages.
const consoleRiverLine = "console river"

// consoleRiverMigratePostgres creates the console's River schema and
// migrates its tables, then retires the bulk jobs an earlier console left
// on the applications' tables (the running requests are resumed on the
// console's own when it starts).
func consoleRiverMigratePostgres(pool *pgxpool.Pool) func(context.Context) error {
	return func(ctx context.Context) error {
		if !migrate.Checking(ctx) {
			if _, err := pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+consoleRiverSchema); err != nil {
				return fmt.Errorf("%s: create schema %s: %w", consoleRiverLine, consoleRiverSchema, err)
			}
		}
		if err := riverMigrate(ctx, riverpgxv5.New(pool), consoleRiverSchema, consoleRiverLine); err != nil || migrate.Checking(ctx) {
			return err
		}
		_, err := pool.Exec(ctx, `DELETE FROM river_job WHERE queue = $1 AND state IN ('available', 'pending', 'retryable', 'scheduled')`, ops.BulkQueue)
		if err != nil {
			return fmt.Errorf("%s: retire bulk jobs from the applications' river_job: %w", consoleRiverLine, err)
		}
		return nil
	}
}

// consoleRiverMigrateSQLite migrates the console's River tables in their
// own file beside path, then retires the bulk jobs an earlier console left
// in db's (the applications') River tables.
func consoleRiverMigrateSQLite(db *sql.DB, path string) func(context.Context) error {
	return func(ctx context.Context) error {
		rdb, err := openConsoleRiverSQLite(ctx, path)
		if err != nil {
			return fmt.Errorf("%s: %w", consoleRiverLine, err)
		}
		defer closeQuietly(rdb)
		if err := riverMigrate(ctx, riversqlite.New(rdb), "", consoleRiverLine); err != nil || migrate.Checking(ctx) {
			return err
		}
		_, err = db.ExecContext(ctx, `DELETE FROM river_job WHERE queue = ? AND state IN ('available', 'pending', 'retryable', 'scheduled')`, ops.BulkQueue)
		if err != nil {
			return fmt.Errorf("%s: retire bulk jobs from the applications' river_job: %w", consoleRiverLine, err)
		}
		return nil
	}
}

// openConsoleRiverSQLite opens the console's River file beside the
// database file path: one connection whose write transactions begin
// IMMEDIATE, as riversqlite advises.
func openConsoleRiverSQLite(ctx context.Context, path string) (*sql.DB, error) {
	file := consoleRiverFile(path)
	db, err := idemsqlite.Open(file)
	if err != nil {
		return nil, err
	}
	defer closeQuietly(db)
	return ops.OpenImmediate(ctx, db)
}

// operationDecisions builds the console's decisions on saga operations and
// its bulk runs: a saga runner without definitions (operator actions use
// only the records: the state machine, the version check and the jobs to
// insert) on the insert-only client of the applications' tables, whose
// jobs, on queue, the applications' River workers run; and the console's
// own River client, on its own tables, working ops.BulkQueue with bulk's
// worker. It registers the saga metrics in reg and sets *skew to the
// runner's clock skew, for /readyz. stop stops the console's client and
// must be called before the database closes. On MySQL (no River) it
// returns no decisions and bulk must be nil.
func operationDecisions(ctx context.Context, db *database, queue string, reg prometheus.Registerer, skew *clockSkew, bulk *bulkRunner, log *slog.Logger) (*ops.Operations, func(), error) {
	if db.MySQL != nil {
		return nil, func() {}, nil
	}
	cfg := saga.Config{Queue: queue, Logger: log}
	if db.Pool != nil {
		dec, err := db.postgresDecisions()
		if err != nil {
			return nil, nil, err
		}
		own := riverpgxv5.New(db.Pool)
		return consoleRiver(ctx, riverpgxv5.New(db.Pool), own, consoleRiverSchema, sagapgx.New(db.Pool), dec, cfg, reg, skew, bulk, log)
	}
	// As the demo: the handle with one connection and BEGIN IMMEDIATE, so
	// that a decision holds the write lock from its read to its audit
	// entry and inserts its job in the same transaction.
	dec, err := db.sqliteDecisions()
	if err != nil {
		return nil, nil, err
	}
	rdb, err := openConsoleRiverSQLite(ctx, db.path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", consoleRiverLine, err)
	}
	decisions, stop, err := consoleRiver(ctx, riversqlite.New(db.Immediate), riversqlite.New(rdb), "", sagasqlite.New(db.Immediate), dec, cfg, reg, skew, bulk, log)
	if err != nil {
		closeQuietly(rdb)
		return nil, nil, err
	}
	return decisions, func() { stop(); closeQuietly(rdb) }, nil
}

// consoleRiver wires operationDecisions: apps is the driver on the
// applications' River tables, own the driver of the console's own, in
// ownSchema.
func consoleRiver[TTx, TOwn any](ctx context.Context, apps riverdriver.Driver[TTx], own riverdriver.Driver[TOwn], ownSchema string, sd sagadriver.Driver[TTx], dec *ops.DB[TTx], cfg saga.Config, reg prometheus.Registerer, skew *clockSkew, bulk *bulkRunner, log *slog.Logger) (*ops.Operations, func(), error) {
	runner, err := saga.NewRunner(sd, cfg)
	if err != nil {
		return nil, nil, err
	}
	inserter, err := river.NewClient(apps, &river.Config{Logger: log.With("component", "river")})
	if err != nil {
		return nil, nil, fmt.Errorf("river client: %w", err)
	}
	runner.SetClient(inserter)
	if err := reg.Register(saga.NewCollector(runner, 5*time.Second)); err != nil {
		return nil, nil, fmt.Errorf("saga metrics: %w", err)
	}
	*skew = checkClock(ctx, runner, log)
	decisions, err := ops.NewOperations(dec, runner)
	if err != nil {
		return nil, nil, err
	}
	decisions.SetLogger(log)
	if bulk == nil {
		return decisions, func() {}, nil
	}
	workers := river.NewWorkers()
	rcfg := &river.Config{Logger: log.With("component", "console-river"), Workers: workers, Schema: ownSchema,
		FetchPollInterval: 250 * time.Millisecond}
	if err := bulk.register(workers, rcfg); err != nil {
		return nil, nil, err
	}
	client, err := river.NewClient(own, rcfg)
	if err != nil {
		return nil, nil, fmt.Errorf("console river client: %w", err)
	}
	bulk.insert = bulkInsert(client)
	bulk.insertAwait = func(ctx context.Context, args ops.VerifyAwaitArgs) error {
		_, err := client.Insert(ctx, args, nil)
		return err
	}
	bulk.newVerifications = func(keys *ops.Keys) (*ops.Verifications, error) {
		return ops.NewVerifications(dec, keys, inserter)
	}
	// Not ctx: River stops when stop says, after the HTTP server, before
	// the database closes.
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, nil, fmt.Errorf("start console river: %w", err)
	}
	return decisions, stopRiver(client, log), nil
}

// errNoConsoleRiver is a bulk request started before the console's own
// River client exists.
var errNoConsoleRiver = errors.New("no River client runs bulk requests")
