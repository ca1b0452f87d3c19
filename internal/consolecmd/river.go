package consolecmd

import (
	"context"
	"database/sql"
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

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/web"
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

// wiredDecisions are the console's operator decisions wired on one database,
// as the web handler serves them: on keys, and without River (MySQL) only
// those; on saga operations; bulk requests and verifications, nil without
// the console's own River (no bulk).
type wiredDecisions struct {
	keys       web.KeyDecider
	operations web.OperationDecider
	bulks      web.BulkService
	verify     web.KeyVerifier
}

// operationDecisions builds the console's decisions on keys of engine and
// on saga operations, and with bulk its bulk runs and verifications: a
// saga runner without definitions (operator actions use only the records:
// the state machine, the version check and the jobs to insert) on the
// insert-only client of the applications' tables, whose jobs, on queue,
// the applications' River workers run; and the console's own River, on
// its own tables, working ops.BulkQueue and ops.VerifyAwaitQueue. It
// registers the saga metrics in reg and sets *skew to the runner's clock
// skew, for /readyz. With eventsQueue not empty, every applied decision
// also inserts its decision event (package decision) on eventsQueue with
// the same insert-only client, in its transaction. stop stops the
// console's client and must be called before the database closes. On
// MySQL (no River) it returns no decisions (the handler makes those on
// keys) and bulk must be nil.
func operationDecisions(ctx context.Context, db *database, engine *idem.Engine, queue, eventsQueue string, reg prometheus.Registerer, skew *clockSkew, bulk *bulkSetup, log *slog.Logger) (*wiredDecisions, func(), error) {
	if db.MySQL != nil {
		return nil, func() {}, nil
	}
	cfg := saga.Config{Queue: queue, Logger: log}
	if db.Pool != nil {
		dec, err := db.postgresDecisions(log)
		if err != nil {
			return nil, nil, err
		}
		keys, err := keysOn(db, dec, engine, db.pgStore)
		if err != nil {
			return nil, nil, err
		}
		own := riverpgxv5.New(db.Pool)
		return consoleRiver(ctx, db, riverpgxv5.New(db.Pool), own, consoleRiverSchema, sagapgx.New(db.Pool), keys, cfg, eventsQueue, reg, skew, bulk, log)
	}
	// As the demo: the handle with one connection and BEGIN IMMEDIATE, so
	// that a decision holds the write lock from its read to its audit
	// entry and inserts its job in the same transaction.
	dec, err := db.sqliteDecisions(log)
	if err != nil {
		return nil, nil, err
	}
	keys, err := keysOn(db, dec, engine, db.sqliteStore)
	if err != nil {
		return nil, nil, err
	}
	rdb, err := openConsoleRiverSQLite(ctx, db.path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", consoleRiverLine, err)
	}
	wired, stop, err := consoleRiver(ctx, db, riversqlite.New(db.Immediate), riversqlite.New(rdb), "", sagasqlite.New(db.Immediate), keys, cfg, eventsQueue, reg, skew, bulk, log)
	if err != nil {
		closeQuietly(rdb)
		return nil, nil, err
	}
	return wired, func() { stop(); closeQuietly(rdb) }, nil
}

// consoleRiver wires operationDecisions in one pass, each part built
// with what it needs: apps is the driver on the applications' River
// tables, own the driver of the console's own, in ownSchema. Bulk runs
// and the waits for verification answers are inserted through an
// insert-only client on the console's tables, built first; their workers
// run on the working client built last, once the bulk decisions and the
// verifications exist.
func consoleRiver[TTx, TOwn any](ctx context.Context, db *database, apps riverdriver.Driver[TTx], own riverdriver.Driver[TOwn], ownSchema string, sd sagadriver.Driver[TTx], keys *ops.Keys[TTx], cfg saga.Config, eventsQueue string, reg prometheus.Registerer, skew *clockSkew, bulk *bulkSetup, log *slog.Logger) (*wiredDecisions, func(), error) {
	runner, err := saga.NewRunner(sd, cfg)
	if err != nil {
		return nil, nil, err
	}
	inserter, err := river.NewClient(apps, &river.Config{Logger: log.With("component", "river")})
	if err != nil {
		return nil, nil, fmt.Errorf("river client: %w", err)
	}
	runner.SetClient(inserter)
	if eventsQueue != "" {
		// Every applied decision inserts its event with the same client,
		// in its transaction.
		if err := keys.DB().EmitEvents(inserter, eventsQueue); err != nil {
			return nil, nil, err
		}
		warnUnworkedEvents(ctx, inserter, eventsQueue, time.Now(), log)
	}
	if err := reg.Register(saga.NewCollector(runner, 5*time.Second)); err != nil {
		return nil, nil, fmt.Errorf("saga metrics: %w", err)
	}
	*skew = checkClock(ctx, runner, log)
	operations, err := ops.NewOperations(keys.DB(), runner)
	if err != nil {
		return nil, nil, err
	}
	wired := &wiredDecisions{keys: keys, operations: operations}
	if bulk == nil {
		return wired, func() {}, nil
	}
	// Insert-only (no Workers, no Queues): it inserts the jobs the
	// working client below runs.
	enqueue, err := river.NewClient(own, &river.Config{Logger: log.With("component", "console-river"), Schema: ownSchema})
	if err != nil {
		return nil, nil, fmt.Errorf("console river client: %w", err)
	}
	verify, err := ops.NewVerifications(keys, inserter, enqueue)
	if err != nil {
		return nil, nil, err
	}
	parts := ops.BulkParts[TTx]{Store: db.Console, Keys: keys, KeyList: db.Records, Operations: operations, Verifications: verify,
		// Four-eyes per person: no account of the requester's person
		// (linked on /users, or with the same verified email) approves.
		Persons: db.Console, Runs: enqueue}
	if db.Sagas != nil {
		parts.OperationList = db.Sagas
	}
	bulks, err := ops.NewBulks(parts, bulk.config)
	if err != nil {
		return nil, nil, err
	}
	workers := river.NewWorkers()
	rcfg := &river.Config{Logger: log.With("component", "console-river"), Workers: workers, Schema: ownSchema,
		FetchPollInterval: 250 * time.Millisecond}
	if err := registerBulk(bulk, workers, rcfg, bulks, verify); err != nil {
		return nil, nil, err
	}
	client, err := river.NewClient(own, rcfg)
	if err != nil {
		return nil, nil, fmt.Errorf("console river client: %w", err)
	}
	// Not ctx: River stops when stop says, after the HTTP server, before
	// the database closes.
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, nil, fmt.Errorf("start console river: %w", err)
	}
	resumeBulk(ctx, bulks, verify, log)
	wired.bulks, wired.verify = bulks, verify
	return wired, stopRiver(client, log), nil
}
