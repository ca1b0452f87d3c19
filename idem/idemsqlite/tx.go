package idemsqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/migrate"
)

// Executor is what the application writes through inside [Store.WithinTx]:
// the transaction's connection. *sql.DB, *sql.Conn and *sql.Tx satisfy it;
// the store's own statements run on one too.
type Executor interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// txKey is the context key under which WithinTx puts its transaction.
type txKey struct{}

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
	fnFailed := false
	err := s.write(ctx, func() error {
		return s.inWriteTx(ctx, func(sqlTx *sql.Tx) error {
			ts := &txStore{ex: sqlTx, ended: new(atomic.Bool)}
			defer ts.ended.Store(true)
			if err := fn(context.WithValue(ctx, txKey{}, sqlTx), ts); err != nil {
				fnFailed = true
				return err
			}
			return nil
		})
	})
	if err != nil && !fnFailed {
		return fmt.Errorf("idemsqlite: within tx: %w", err)
	}
	return err
}

// takeWriteLockSQL is the first statement of WithinTx's transaction: an
// UPDATE that matches no row, which takes the database's write lock (and
// waits for it under busy_timeout, as BEGIN IMMEDIATE does) and changes
// nothing.
const takeWriteLockSQL = `UPDATE unstuck_idem_record SET id = id WHERE 0`

// inWriteTx runs fn in a *sql.Tx that holds the write lock from its first
// statement, on a connection of its own, and commits if fn returns nil.
// BEGIN and COMMIT run without ctx's cancellation; a connection whose
// ROLLBACK failed is discarded rather than returned to the pool.
func (s *Store) inWriteTx(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("get connection: %w", err)
	}
	defer func() {
		if cerr := conn.Close(); cerr != nil && !errors.Is(cerr, sql.ErrConnDone) {
			err = errors.Join(err, fmt.Errorf("release connection: %w", cerr))
		}
	}()
	tx, err := conn.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	done := false
	defer func() {
		if done {
			return
		}
		if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
			err = errors.Join(err, fmt.Errorf("rollback: %w", rerr), migrate.Discard(conn))
		}
	}()
	if _, err := tx.ExecContext(ctx, takeWriteLockSQL); err != nil {
		return fmt.Errorf("take the write lock: %w", err)
	}
	if err := fn(tx); err != nil {
		return err
	}
	// Commit rolls back a COMMIT that fails (a deferred foreign key, for
	// instance), so the connection never goes back inside a transaction.
	done = true
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// TxFrom returns the transaction that [Store.WithinTx] put in ctx, for the
// application's writes that must commit or roll back with the record's,
// and for other engines' …Tx calls on the same database file (a saga
// runner's StartTx on sagasqlite, whose transactions are *sql.Tx); ok is
// false when ctx does not come from WithinTx. WithinTx owns the
// transaction: do not commit or roll it back (a SAVEPOINT is fine), do not
// use it after fn has returned, and do not use it from several goroutines
// at once.
func TxFrom(ctx context.Context) (*sql.Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(*sql.Tx)
	return tx, ok
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
	return &txStore{ex: tx}
}

// txStore is the idemdriver.Store of [Store.Tx] and of WithinTx's fn: the
// store's calls on one transaction. It is not safe for concurrent use.
// ended, set only by WithinTx, is atomic so that a call after fn has
// returned, from any goroutine, is refused without a data race.
type txStore struct {
	ex    Executor
	ended *atomic.Bool // nil for Tx
}

// exec returns the executor to run op on, or an error once WithinTx's fn has
// returned.
func (t *txStore) exec(op string) (Executor, error) {
	if t.ended != nil && t.ended.Load() {
		return nil, fmt.Errorf("idemsqlite: %s: the transaction of WithinTx has ended: %w", op, sql.ErrTxDone)
	}
	return t.ex, nil
}

func (t *txStore) Reserve(ctx context.Context, p idemdriver.ReserveParams) (idemdriver.Record, bool, error) {
	ex, err := t.exec("reserve")
	if err != nil {
		return idemdriver.Record{}, false, err
	}
	rec, created, err := insert(ctx, ex, p, clock(p.Now))
	if err != nil {
		return idemdriver.Record{}, false, fmt.Errorf("idemsqlite: reserve: %w", err)
	}
	return rec, created, nil
}

func (t *txStore) Takeover(ctx context.Context, p idemdriver.TakeoverParams) (idemdriver.Record, error) {
	ex, err := t.exec("takeover")
	if err != nil {
		return idemdriver.Record{}, err
	}
	rec, err := takeover(ctx, ex, p)
	if err != nil {
		return idemdriver.Record{}, fmt.Errorf("idemsqlite: takeover: %w", err)
	}
	return rec, nil
}

func (t *txStore) Complete(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, c idemdriver.Completion) error {
	ex, err := t.exec("complete")
	if err != nil {
		return err
	}
	if err := complete(ctx, ex, id, o, c); err != nil {
		return fmt.Errorf("idemsqlite: complete: %w", err)
	}
	return nil
}

func (t *txStore) Annotate(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, a idemdriver.Annotation) error {
	ex, err := t.exec("annotate")
	if err != nil {
		return err
	}
	if err := annotate(ctx, ex, id, o, a); err != nil {
		return fmt.Errorf("idemsqlite: annotate: %w", err)
	}
	return nil
}

func (t *txStore) Release(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner) error {
	ex, err := t.exec("release")
	if err != nil {
		return err
	}
	if err := release(ctx, ex, id, o); err != nil {
		return fmt.Errorf("idemsqlite: release: %w", err)
	}
	return nil
}

func (t *txStore) Get(ctx context.Context, id idemdriver.Ident) (idemdriver.Record, bool, error) {
	ex, err := t.exec("get")
	if err != nil {
		return idemdriver.Record{}, false, err
	}
	rec, ok, err := get(ctx, ex, id, clock(time.Time{}))
	if err != nil {
		return idemdriver.Record{}, false, fmt.Errorf("idemsqlite: get: %w", err)
	}
	return rec, ok, nil
}

func (t *txStore) Delete(ctx context.Context, id idemdriver.Ident) (bool, error) {
	ex, err := t.exec("delete")
	if err != nil {
		return false, err
	}
	existed, err := deleteRecord(ctx, ex, id)
	if err != nil {
		return false, fmt.Errorf("idemsqlite: delete: %w", err)
	}
	return existed, nil
}

func (t *txStore) Sweep(ctx context.Context, p idemdriver.SweepParams) (idemdriver.SweepResult, error) {
	ex, err := t.exec("sweep")
	if err != nil {
		return idemdriver.SweepResult{}, err
	}
	res, err := sweep(ctx, ex, p)
	if err != nil {
		return idemdriver.SweepResult{}, fmt.Errorf("idemsqlite: sweep: %w", err)
	}
	return res, nil
}

func (t *txStore) Extend(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, lease time.Duration, now time.Time) (time.Time, error) {
	ex, err := t.exec("extend")
	if err != nil {
		return time.Time{}, err
	}
	until, err := extend(ctx, ex, id, o, lease, now)
	if err != nil {
		return time.Time{}, fmt.Errorf("idemsqlite: extend: %w", err)
	}
	return until, nil
}

func (t *txStore) Settle(ctx context.Context, id idemdriver.Ident, st idemdriver.Settlement) (idemdriver.Record, bool, error) {
	ex, err := t.exec("settle")
	if err != nil {
		return idemdriver.Record{}, false, err
	}
	rec, ok, err := settle(ctx, ex, id, st)
	if err != nil && !errors.Is(err, idemdriver.ErrStale) {
		return idemdriver.Record{}, false, fmt.Errorf("idemsqlite: settle: %w", err)
	}
	return rec, ok, err
}
