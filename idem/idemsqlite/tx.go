package idemsqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/internal/sqlstore"
)

// Executor is what the application writes through: *sql.DB, *sql.Conn
// and *sql.Tx satisfy it; the store's own statements run on one too.
type Executor = sqlstore.Executor

// WithinTx implements [idemdriver.TxStore.WithinTx] (SPEC IDEM-H17): it begins a
// *sql.Tx on one connection of the pool that holds the database's write
// lock from its start, and calls fn with a context that carries that
// transaction and with tx, an [idemdriver.Store] whose calls run in it
// without beginning transactions of their own. The application reaches the
// transaction with [TxFrom] and makes its own writes through it — or hands
// it to another engine's …Tx call, such as a saga runner's StartTx on
// sagasqlite — so that they and the record's writes commit together or not
// at all.
//
// WithinTx owns the transaction: if fn returns nil it commits and returns
// the commit's error; otherwise, or if fn panics, it rolls back and returns
// fn's error. The transaction is begun without ctx's cancellation, so ctx
// ending neither rolls it back under fn nor cancels the COMMIT, and the
// connection always goes back to the pool (or is closed if ROLLBACK fails).
//
// The write lock is taken by the transaction's first statement, a write
// that changes no row (takeWriteLockSQL), so that the *sql.Tx behaves as
// BEGIN IMMEDIATE whatever the handle's _txlock: a deferred transaction
// that reads, and then writes after another connection's commit, fails
// with SQLITE_BUSY whatever the busy timeout.
//
// Transactional mode serialises writes on SQLite. The transaction holds the
// database's write lock, and this Store's writer semaphore, from BEGIN to
// its end: every other write of this Store waits in the process for
// WithinTx to return, and writers on other handles or in other processes
// wait in SQLite's busy handler, failing with SQLITE_BUSY after its timeout
// (10 s with [Open]). Reads go on (WAL) and do not see the transaction
// before it commits. So fn should be short and must make no network call
// and wait for no other request. In particular fn must not write through
// the Store itself, only through tx and the transaction: such a write waits
// for the semaphore that WithinTx holds until ctx ends.
//
// tx refuses every call once fn has returned, with an error wrapping
// [sql.ErrTxDone]. tx and the transaction in ctx are one connection and
// are not safe for concurrent use: fn calls them from one goroutine at a
// time. Leases and retention are judged as by the Store: by the process
// clock at each call, or by a params struct's Now.
func (s *Store) WithinTx(ctx context.Context, fn func(ctx context.Context, tx idemdriver.Store) error) error {
	return sqlstore.WithinTx(ctx, driverName, ops{}, func(ctx context.Context, fn func(tx *sql.Tx) error) error {
		return s.write(ctx, func() error { return sqlstore.InTx(ctx, s.db, nil, takeWriteLockSQL, fn) })
	}, fn)
}

// takeWriteLockSQL is the first statement of WithinTx's transaction: an
// UPDATE that matches no row, which takes the database's write lock (and
// waits for it under busy_timeout, as BEGIN IMMEDIATE does) and changes
// nothing.
const takeWriteLockSQL = `UPDATE unstuck_idem_record SET id = id WHERE 0`

// TxFrom returns the transaction that [Store.WithinTx] put in ctx, for the
// application's writes that must commit or roll back with the record's,
// and for other engines' …Tx calls on the same database file (a saga
// runner's StartTx on sagasqlite, whose transactions are *sql.Tx); ok is
// false when ctx does not come from WithinTx. WithinTx owns the
// transaction: do not commit or roll it back (a SAVEPOINT is fine), do not
// use it after fn has returned, and do not use it from several goroutines
// at once.
func TxFrom(ctx context.Context) (*sql.Tx, bool) {
	return sqlstore.TxFrom(ctx)
}

// Tx returns the store's primitives on tx, a transaction the caller began
// on the store's database file and owns, River style: every call runs
// inside it and none begins, commits or rolls back, so that the record's writes commit or roll back
// with the caller's own (the console's decision and its audit entry, for
// instance). The caller commits or rolls back.
//
// The transaction must hold the write lock from its start (BEGIN
// IMMEDIATE: a handle opened with _txlock=immediate begins its *sql.Tx so):
// a deferred transaction that reads, and then writes after another
// connection's commit, fails with SQLITE_BUSY whatever the busy timeout.
// The calls do not take the Store's writer semaphore: the transaction's
// write lock already excludes every other writer, which waits in SQLite's
// busy handler. Once tx has ended, every call fails with [sql.ErrTxDone].
// The returned Store is not safe for concurrent use, as tx is not. Leases
// and retention are judged as by the Store.
func (s *Store) Tx(tx *sql.Tx) idemdriver.Store {
	return sqlstore.NewTxStore(driverName, ops{}, tx)
}

// ops are the store's primitives on one executor ([sqlstore.Ops]), for
// the Store of a transaction: leases and retention judged by the process
// clock at each call, or by a params struct's Now.
type ops struct{}

func (ops) Reserve(ctx context.Context, ex Executor, p idemdriver.ReserveParams) (idemdriver.Record, bool, error) {
	return insert(ctx, ex, p, clock(p.Now))
}

func (ops) Get(ctx context.Context, ex Executor, id idemdriver.Ident) (idemdriver.Record, bool, error) {
	return get(ctx, ex, id, clock(time.Time{}))
}

// driverName prefixes the errors of the store's calls.
const driverName = "idemsqlite"
