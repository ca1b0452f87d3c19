package consolecmd

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemmysql"
	"github.com/unstuckhq/unstuck/idem/idempgx"
	"github.com/unstuckhq/unstuck/idem/idemredis"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
	"github.com/unstuckhq/unstuck/migrate"
	"github.com/unstuckhq/unstuck/migrate/migratemysql"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/saga/sagapgx"
	"github.com/unstuckhq/unstuck/saga/sagasqlite"
)

// database is an opened database with the engine's store and the
// console's store over it.
type database struct {
	// Redacted is the URL without a password, fit for logs and messages.
	Redacted string
	Store    idemdriver.Store
	// Records is the same driver's admin contract: the console reads the
	// engine's key records only through it.
	Records idemdriver.Admin
	Console *store.DB
	// Sagas reads the saga records for the console (the saga driver's
	// admin contract); nil on MySQL, where SagasUnavailable says why.
	Sagas            sagadriver.Admin
	SagasUnavailable string
	// Trail is the audit trail of operator decisions.
	Trail *audit.Trail
	// Embedded is true for SQLite, the zero-setup default.
	Embedded bool
	// Pool is the PostgreSQL pool (nil for SQLite); SQL the SQLite handle
	// (nil for PostgreSQL). For wiring River and the saga stores.
	Pool *pgxpool.Pool
	SQL  *sql.DB
	// MySQL is the MySQL handle (nil otherwise): the engine's store, the
	// console's tables and the trail share it.
	MySQL *sql.DB
	// Immediate is, on SQLite, a second handle on the file with one
	// connection whose write transactions begin IMMEDIATE
	// (ops.OpenImmediate): the console's decisions and River run on it.
	Immediate *sql.DB
	// path is the SQLite file's absolute path ("" otherwise).
	path string
	// pgStore and sqliteStore are Store as its driver's type, for
	// binding it to a decision's transaction.
	pgStore     *idempgx.Store
	sqliteStore *idemsqlite.Store
	mysqlStore  *idemmysql.Store
	migrate     []func(context.Context) error
	Close       func()

	// redisKeys, when set (--keys), is Store and Records: see useRedisKeys.
	redisKeys *idemredis.Store
}

// Migrate applies the engines' migrations (idempotency records, sagas,
// the applications' River job tables; each engine's migrations create
// every index of its tables, including those the console's pages use),
// then the console's (its own River tables, see consoleRiverSchema, and
// its own tables) and the audit trail's.
func (d *database) Migrate(ctx context.Context) error {
	for _, m := range d.migrate {
		if err := m(ctx); err != nil {
			return err
		}
	}
	return nil
}

// CheckSchema returns nil when every migration that Migrate applies is
// applied, else an error naming what is behind and the command to run. It
// changes nothing.
func (d *database) CheckSchema(ctx context.Context) error {
	check := migrate.CheckOnly(ctx)
	var behind []string
	for _, m := range d.migrate {
		err := m(check)
		if be := (*migrate.BehindError)(nil); errors.As(err, &be) {
			behind = append(behind, be.Line+" ("+strings.Join(be.Pending, ", ")+")")
			continue
		}
		if err != nil {
			return fmt.Errorf("check the schema of %s: %w", d.Redacted, err)
		}
	}
	if len(behind) > 0 {
		return &schemaBehindError{redacted: d.Redacted, lines: behind}
	}
	return nil
}

// schemaBehindError is a database whose schema lacks migrations.
type schemaBehindError struct {
	redacted string
	lines    []string
}

func (e *schemaBehindError) Error() string {
	return fmt.Sprintf("the database schema is behind: %s not applied; run: console migrate --db %s",
		strings.Join(e.lines, "; "), e.redacted)
}

// openDatabase opens a PostgreSQL URL (postgres:// or postgresql://) or
// sqlite:PATH (the embedded default; the file is created if missing and
// migrated: SQLite migrates itself, PostgreSQL is migrated by "console
// migrate" as a deliberate step).
func openDatabase(ctx context.Context, rawURL string) (*database, error) {
	d, err := openUnmigrated(ctx, rawURL)
	if err != nil || !d.Embedded {
		return d, err
	}
	// The embedded default migrates itself, for every subcommand.
	if err := d.Migrate(ctx); err != nil {
		d.Close()
		return nil, fmt.Errorf("migrate %s: %w", rawURL, err)
	}
	return d, nil
}

// openUnmigrated is openDatabase without SQLite's own migration, for
// the demo, which must look at a database before anything is added to it.
func openUnmigrated(ctx context.Context, rawURL string) (*database, error) {
	switch {
	case strings.HasPrefix(rawURL, "postgres://"), strings.HasPrefix(rawURL, "postgresql://"):
		if _, err := url.Parse(rawURL); err != nil {
			return nil, errors.New("database URL cannot be parsed")
		}
		redacted := redactURL(rawURL)
		cfg, err := pgxpool.ParseConfig(rawURL)
		if err != nil {
			return nil, fmt.Errorf("database URL %s: %w", redacted, err)
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", redacted, err)
		}
		if err := pool.Ping(ctx); err != nil {
			pool.Close()
			return nil, fmt.Errorf("connect to %s: %w", redacted, err)
		}
		s, c, sd := idempgx.New(pool), store.NewPostgres(pool), sagapgx.New(pool)
		return &database{Redacted: redacted, Store: s, Records: s, Console: c, Sagas: sd, Pool: pool, pgStore: s,
			Trail: audit.NewPostgres(pool),
			migrate: []func(context.Context) error{s.Migrate, sd.Migrate,
				func(ctx context.Context) error { return riverMigrate(ctx, riverpgxv5.New(pool), "", "river") },
				consoleRiverMigratePostgres(pool), c.Migrate, audit.NewPostgres(pool).Migrate}, Close: pool.Close}, nil
	case isMySQL(rawURL):
		return openMySQL(ctx, rawURL)
	case strings.HasPrefix(rawURL, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(rawURL, "sqlite:"), "//")
		if path == "" {
			return nil, errors.New("database URL sqlite: needs a path, e.g. sqlite:/var/lib/unstuck/console.db")
		}
		path, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", rawURL, err)
		}
		db, err := idemsqlite.Open(path)
		if err != nil {
			return nil, sqliteOpenError(rawURL, path, err)
		}
		if err := db.PingContext(ctx); err != nil {
			_ = db.Close()
			return nil, sqliteOpenError(rawURL, path, err)
		}
		imm, err := ops.OpenImmediate(ctx, db)
		if err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("open %s: %w", rawURL, err)
		}
		s, c, sd := idemsqlite.New(db), store.NewSQLite(db), sagasqlite.New(db)
		return &database{Redacted: rawURL, Store: s, Records: s, Console: c, Sagas: sd, Embedded: true, SQL: db, Immediate: imm, sqliteStore: s,
			Trail: audit.NewSQLite(db), path: path,
			migrate: []func(context.Context) error{s.Migrate, sd.Migrate, riverMigrateSQLite(db),
				consoleRiverMigrateSQLite(db, path), c.Migrate, audit.NewSQLite(db).Migrate}, Close: func() { closeQuietly(imm); closeQuietly(db) }}, nil
	default:
		return nil, fmt.Errorf("database URL must start with postgres://, postgresql://, mysql:// or sqlite:, or be a go-sql-driver DSN user:pass@tcp(host:3306)/db (got %q)", schemeOf(rawURL))
	}
}

func closeQuietly(db *sql.DB) { _ = db.Close() }

// sqliteOpenError is err, from opening the SQLite file at path, with the
// fix when the cause is a directory that does not exist: SQLite creates
// the file but not its directory, and says only "unable to open database
// file (14)".
func sqliteOpenError(rawURL, path string, err error) error {
	dir := filepath.Dir(path)
	if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
		return fmt.Errorf("open %s: the directory %s does not exist; create it (mkdir -p %s) or choose another path: %w", rawURL, dir, dir, err)
	}
	return fmt.Errorf("open %s: %w", rawURL, err)
}

// explain returns err with the fix first when the cause is a table the
// database does not have (PostgreSQL SQLSTATE 42P01, MySQL and MariaDB
// error 1146): nobody ran "console migrate" on it. Any other error is
// returned as it is.
func (d *database) explain(err error) error {
	var pgErr *pgconn.PgError
	if (errors.As(err, &pgErr) && pgErr.Code == "42P01") || migratemysql.IsMySQLError(err, 1146) {
		return fmt.Errorf("the database has no console tables yet: run console migrate --db %s first (%w)", d.Redacted, err)
	}
	return err
}

// postgresDecisions returns the console's decisions on the pool, audited
// in the trail as it is now (after useAuditKeys), logging to log.
func (d *database) postgresDecisions(log *slog.Logger) (*ops.DB[pgx.Tx], error) {
	return ops.Postgres(d.Pool, d.Trail, d.Console, log)
}

// sqliteDecisions returns the console's decisions on the Immediate
// handle, audited in the trail as it is now (after useAuditKeys), logging
// to log.
func (d *database) sqliteDecisions(log *slog.Logger) (*ops.DB[*sql.Tx], error) {
	return ops.SQLite(d.Immediate, d.Trail, d.Console, log)
}

// keyDecisions returns the console's decisions on keys of engine, whose
// store must be d.Store, logging to log: for a console without River
// (MySQL), or one that serves no operation decisions.
func (d *database) keyDecisions(engine *idem.Engine, log *slog.Logger) (web.KeyDecider, error) {
	switch {
	case d.MySQL != nil:
		db, err := d.mysqlDecisions(log)
		if err != nil {
			return nil, err
		}
		return keysOn(d, db, engine, d.mysqlStore)
	case d.Pool != nil:
		db, err := d.postgresDecisions(log)
		if err != nil {
			return nil, err
		}
		return keysOn(d, db, engine, d.pgStore)
	default:
		db, err := d.sqliteDecisions(log)
		if err != nil {
			return nil, err
		}
		return keysOn(d, db, engine, d.sqliteStore)
	}
}

// keysOn returns the decisions on keys of engine in db's transactions:
// on d's Redis store when it has one (intent, compare-and-swap, outcome:
// ops.NewKeysOnStore), else on stores, the idempotency store of db's
// database (d.Store as its driver's type), with each removed record's
// tombstone (SPEC K21).
func keysOn[TTx any](d *database, db *ops.DB[TTx], engine *idem.Engine, stores interface {
	Tx(tx TTx) idemdriver.Store
}) (*ops.Keys[TTx], error) {
	if d.redisKeys != nil {
		return ops.NewKeysOnStore(db, engine, d.redisKeys, d.redisKeys)
	}
	return ops.NewKeys(db, engine, stores, d.Records)
}

// schemeOf returns what precedes the first colon, so an error never echoes
// a whole URL that may hold a password.
func schemeOf(raw string) string {
	if i := strings.IndexByte(raw, ':'); i >= 0 {
		return raw[:i+1] + "…"
	}
	if len(raw) > 12 {
		return raw[:12] + "…"
	}
	return raw
}
