package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/unstuckhq/unstuck/internal/fielderr"
	"io/fs"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/alexedwards/scs/sqlite3store"
	"github.com/alexedwards/scs/v2"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/unstuckhq/unstuck/migrate/migratemysql"
	"github.com/unstuckhq/unstuck/migrate/migratepgx"
	"github.com/unstuckhq/unstuck/migrate/migratesqlite"
)

// Dialects, as [DB.Dialect] reports them.
const (
	DialectPostgres = "postgres"
	DialectSQLite   = "sqlite"
	DialectMySQL    = "mysql"
)

// Errors of the store's calls, matched with errors.Is.
var (
	// ErrNotFound: the user named by a write does not exist. Reads report
	// absence with ok = false instead.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a unique value is taken (a username).
	ErrConflict = errors.New("already exists")
	// ErrInvalid: an argument was refused before the database was asked.
	// The error is a *[fielderr.Error] naming the field.
	ErrInvalid = errors.New("invalid argument")
)

// invalid is the error of an argument refused by the store: field names
// it as the caller knows it ("username", "role", …) and reason says why.
// It matches [ErrInvalid].
func invalid(field, reason string) *fielderr.Error {
	return &fielderr.Error{Field: field, Reason: reason, In: "store", Is: ErrInvalid}
}

// defaultCountCap is how many operations of one status OperationOverview
// counts exactly before it turns to the planner's statistics (PostgreSQL).
const defaultCountCap = 1000

// DB is the console's persistence on one database: PostgreSQL through a
// pgx pool, or SQLite through a *sql.DB. It is safe for concurrent use. It
// never closes the pool or handle it was given. Every table name is
// unqualified: on PostgreSQL they resolve in the pool's search_path. It
// reads no table of the idempotency engine: the console reads those
// through the driver's idemdriver.Admin.
type DB struct {
	dialect string
	pool    *pgxpool.Pool // postgres
	sqlite  *sql.DB       // sqlite, mysql (the database/sql handle)

	// countCap bounds the exact count of one status in OperationOverview;
	// tests lower it to reach the estimate path.
	countCap int
}

// NewPostgres returns a DB on pool, which must not be nil.
func NewPostgres(pool *pgxpool.Pool) *DB {
	return &DB{dialect: DialectPostgres, pool: pool, countCap: defaultCountCap}
}

// NewSQLite returns a DB on db, which must not be nil and should come from
// idem/idemsqlite's Open (WAL, busy timeout on every connection).
func NewSQLite(db *sql.DB) *DB {
	return &DB{dialect: DialectSQLite, sqlite: db, countCap: defaultCountCap}
}

// Dialect reports [DialectPostgres], [DialectSQLite] or [DialectMySQL].
func (d *DB) Dialect() string { return d.dialect }

// Ping checks that the database answers.
func (d *DB) Ping(ctx context.Context) error {
	var err error
	switch d.dialect {
	case DialectPostgres:
		err = d.pool.Ping(ctx)
	default:
		err = d.sqlite.PingContext(ctx)
	}
	if err != nil {
		return fmt.Errorf("store: ping: %w", err)
	}
	return nil
}

// Migrate creates or upgrades the console's tables: it applies every
// migration of the "console" line that the unstuck_migration table does not
// list yet, with the same bookkeeping as the drivers' "idem" line. It is
// idempotent and safe to call concurrently from several processes. It
// touches no table of the engine (the indexes the console's key pages need
// are the driver's, created by its own Migrate), so it needs no other
// migration first.
func (d *DB) Migrate(ctx context.Context) error {
	if err := d.migrate(ctx); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	return nil
}

// migrateLine applies (or, under migrate.CheckOnly, checks) one migration
// line of the console.
func (d *DB) migrateLine(ctx context.Context, line string, fsys fs.FS) error {
	switch d.dialect {
	case DialectPostgres:
		return migratepgx.Migrate(ctx, d.pool, line, fsys)
	case DialectMySQL:
		return migratemysql.Migrate(ctx, d.sqlite, line, fsys)
	}
	return migratesqlite.Migrate(ctx, d.sqlite, line, fsys)
}

func (d *DB) migrate(ctx context.Context) error {
	fsys, err := fs.Sub(migrations, "migration/"+d.dialect)
	if err != nil {
		return err
	}
	return d.migrateLine(ctx, migrationLine, fsys)
}

// SessionStore returns the scs store of the console's sessions, in the
// "sessions" table that Migrate creates: scs's pgxstore on PostgreSQL,
// sqlite3store on SQLite, whose commit is skipped when nothing but a small
// extension of the idle deadline would be written (see [WithSessionMemo]).
// The store runs no goroutine of its own: expired sessions are never
// returned by Find, and are deleted from the table by
// [DB.DeleteExpiredSessions], which the caller runs periodically.
func (d *DB) SessionStore() scs.Store {
	switch d.dialect {
	case DialectPostgres:
		return &sessionStore{base: pgxstore.NewWithCleanupInterval(d.pool, 0), find: pgFindSession(d.pool), commit: pgCommitSession(d.pool)}
	case DialectMySQL:
		return &sessionStore{base: mysqlSessionBase{d.sqlite}, find: mysqlFindSession(d.sqlite), commit: mysqlCommitSession(d.sqlite)}
	}
	return &sessionStore{base: sqlite3store.NewWithCleanupInterval(d.sqlite, 0), find: sqliteFindSession(d.sqlite),
		commit: sqliteCommitSession(d.sqlite)}
}

// DeleteExpiredSessions deletes the sessions whose expiry has passed, as
// the scs stores' own cleanup does, and reports how many it deleted.
func (d *DB) DeleteExpiredSessions(ctx context.Context) (int64, error) {
	var (
		n   int64
		err error
	)
	switch d.dialect {
	case DialectPostgres:
		n, err = pgDeleteExpiredSessions(ctx, d.pool)
	case DialectMySQL:
		n, err = mysqlDeleteExpiredSessions(ctx, d.sqlite)
	default:
		n, err = sqliteDeleteExpiredSessions(ctx, d.sqlite)
	}
	if err != nil {
		return 0, fmt.Errorf("store: delete expired sessions: %w", err)
	}
	return n, nil
}
