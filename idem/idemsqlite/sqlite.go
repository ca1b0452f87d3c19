package idemsqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/internal/leanpath"
	"github.com/unstuckhq/unstuck/idem/internal/sqlstore"
	"github.com/unstuckhq/unstuck/migrate/migratesqlite"
)

var (
	_ idemdriver.TxStore    = (*Store)(nil)
	_ idemdriver.LocalStore = (*Store)(nil)
	_ idemdriver.Admin      = (*Store)(nil)
	_ idemdriver.Seeder     = (*Store)(nil)
)

// Store is an [idemdriver.TxStore] on a SQLite database. It is safe for
// concurrent use by many goroutines, and by several processes on the same
// host sharing the database file. It judges time by the process clock (see
// the package documentation) unless a params struct carries a non-zero Now.
type Store struct {
	db *sql.DB
	// writer is a semaphore of one that every write of this store holds,
	// and WithinTx for the whole of its transaction.
	// SQLite admits one writer at a time; queueing writers here hands the
	// lock over at once, where waiting in SQLite's busy handler polls with
	// sleeps of up to 100ms and collapses under many concurrent writers.
	// Writers in other processes or on other stores still wait in the busy
	// handler.
	writer chan struct{}

	// The statements of the common path, prepared on db on first use; see
	// prepared.
	getStmt, insertStmt, completeStmt atomic.Pointer[sql.Stmt]
	getLeanStmt, insertLeanStmt       atomic.Pointer[sql.Stmt]
	// path chooses the way of a lean Reserve (see reserveLean).
	path leanpath.Path
	// notLean is set once db turns out not to come from Open: its
	// connections are not leanConns, and lean reads use getLeanStmt.
	notLean atomic.Bool
}

// New returns a store on db, which must have been migrated with
// [Store.Migrate] before the store is used. db should come from [Open]; a
// caller that opens it otherwise must set a busy timeout on every
// connection, or concurrent writers fail at once with SQLITE_BUSY. The store
// never closes db.
func New(db *sql.DB) *Store {
	return &Store{db: db, writer: make(chan struct{}, 1), path: leanpath.Path{Costs: leanCosts}}
}

// write runs fn while holding the store's writer semaphore, or returns
// ctx.Err() if ctx ends first.
func (s *Store) write(ctx context.Context, fn func() error) error {
	return s.writeAfterWait(ctx, func(bool) error { return fn() })
}

// writeAfterWait is write that tells fn whether it had to wait for the
// semaphore, in which case another writer may have changed what fn read
// before. The wait also ends at the engine's [idemdriver.CallDeadline], with an
// error matching context.DeadlineExceeded; the timer for it is made only
// when the semaphore is taken.
func (s *Store) writeAfterWait(ctx context.Context, fn func(waited bool) error) error {
	waited := false
	select {
	case s.writer <- struct{}{}:
	default:
		waited = true
		var expired <-chan time.Time
		if deadline, ok := idemdriver.CallDeadline(ctx); ok {
			t := time.NewTimer(time.Until(deadline))
			defer t.Stop()
			expired = t.C
		}
		select {
		case s.writer <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		case <-expired:
			return fmt.Errorf("waiting for the store's writer: %w", context.DeadlineExceeded)
		}
	}
	defer func() { <-s.writer }()
	return fn(waited)
}

// LocalCalls implements [idemdriver.LocalStore]: the engine passes the store
// timeout as an [idemdriver.CallDeadline], which bounds the wait for the store's
// writer; a wait for another handle's write lock is bounded by the busy
// timeout (10 s with [Open]), and reads in WAL mode do not wait for
// writers.
func (s *Store) LocalCalls() {}

// Migrate creates or upgrades the store's tables: it applies, in order, every
// migration of the "idem" line that the unstuck_migration table does not
// list yet, each in its own transaction together with its bookkeeping row.
// It is idempotent, and safe to call concurrently from several handles or
// processes on the same database file.
func (s *Store) Migrate(ctx context.Context) error {
	fsys, err := fs.Sub(idemMigrations, "migration/idem")
	if err != nil {
		return fmt.Errorf("idemsqlite: migrate: %w", err)
	}
	if err := migratesqlite.Migrate(ctx, s.db, "idem", fsys); err != nil {
		return fmt.Errorf("idemsqlite: migrate: %w", err)
	}
	return nil
}

// Open opens the SQLite database file at path, creating it if missing, with
// the settings the store needs on every connection: busy_timeout(10000) so
// that concurrent writers wait for each other instead of failing,
// journal_mode(WAL) so that readers never block the writer,
// foreign_keys(1), and synchronous(NORMAL), which is durable across process
// crashes and, in WAL mode, loses at most the last transactions on power
// loss. The pool keeps up to max(4, GOMAXPROCS) connections open and idle,
// since each new connection runs the pragmas and parses the schema again.
// Each connection keeps the store's read of a repeat prepared and
// finalizes it when it closes, so [sql.Conn.Raw] hands out a wrapper of
// modernc.org/sqlite's connection, not the connection itself. The caller
// closes the returned handle.
//
// A caller that opens the database itself must at least set busy_timeout on
// every connection (in the DSN, for instance
// "file:/path/db.sqlite?_pragma=busy_timeout(10000)"), because the pragma is
// per connection and the default is to fail at once.
func Open(path string) (*sql.DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("idemsqlite: open %q: %w", path, err)
	}
	// A file: URI with an escaped path, so that a '?' or '%' in the path
	// cannot be taken for the start of the parameters.
	q := url.Values{"_pragma": {
		"busy_timeout(10000)",
		"journal_mode(WAL)",
		"foreign_keys(1)",
		"synchronous(NORMAL)",
	}}
	dsn := (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q.Encode()}).String()
	connector, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, fmt.Errorf("idemsqlite: open %q: %w", path, err)
	}
	db := sql.OpenDB(leanConnector{connector})
	// SQLite has one writer at a time, and readers beyond the CPUs only
	// queue: a small pool that is never trimmed costs little.
	conns := max(4, runtime.GOMAXPROCS(0))
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	// Open connects lazily; ping so that a bad path fails here, not at the
	// first query.
	if err := db.Ping(); err != nil {
		return nil, errors.Join(fmt.Errorf("idemsqlite: open %q: %w", path, err), db.Close())
	}
	return db, nil
}

// immediate runs fn in a BEGIN IMMEDIATE transaction ([migratesqlite.Immediate]:
// the write lock taken up front, COMMIT never cancelled) while holding the
// store's writer semaphore.
func (s *Store) immediate(ctx context.Context, fn func(conn *sql.Conn) error) error {
	return s.write(ctx, func() error { return migratesqlite.Immediate(ctx, s.db, fn) })
}

// prepared returns query prepared on the pool, kept in slot
// ([sqlstore.Prepared]).
func (s *Store) prepared(ctx context.Context, slot *atomic.Pointer[sql.Stmt], query string) (*sql.Stmt, error) {
	return sqlstore.Prepared(ctx, s.db, slot, query)
}
