package idemsqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// Executor is what the application writes through inside [Store.WithinTx]:
// the transaction's connection. *sql.DB, *sql.Conn and *sql.Tx satisfy it;
// the store's own statements run on one too.
type Executor interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// txKey is the context key under which WithinTx puts its connection.
type txKey struct{}

// WithinTx implements [idemdriver.TxStore.WithinTx] (SPEC IDEM-H17): it begins a
// BEGIN IMMEDIATE transaction on one connection of the pool and calls fn
// with a context that carries that connection and with tx, an [idemdriver.Store]
// whose calls run on it, inside the transaction, without beginning
// transactions of their own. The application reaches the connection with
// [TxFrom] and makes its own writes through it, so that they and the
// record's writes commit together or not at all.
//
// WithinTx owns the transaction: if fn returns nil it runs COMMIT and
// returns its error; otherwise, or if fn panics, it runs ROLLBACK and
// returns fn's error. Both run without ctx's cancellation, and the
// connection always goes back to the pool (or is closed if ROLLBACK fails).
//
// Transactional mode serialises writes on SQLite. The transaction holds the
// database's write lock, and this Store's writer semaphore, from BEGIN to
// its end: every other write of this Store waits in the process for
// WithinTx to return, and writers on other handles or in other processes
// wait in SQLite's busy handler, failing with SQLITE_BUSY after its timeout
// (10 s with [Open]). Reads go on (WAL) and do not see the transaction
// before it commits. So fn should be short and must make no network call
// and wait for no other request. In particular fn must not write through
// the Store itself, only through tx and the connection: such a write waits
// for the semaphore that WithinTx holds until ctx ends.
//
// tx refuses every call once fn has returned, with an error wrapping
// [sql.ErrTxDone]. tx and the connection in ctx are one connection and are
// not safe for concurrent use: fn calls them from one goroutine at a time.
// Leases and retention are judged as by the Store: by the process clock at
// each call, or by a params struct's Now.
func (s *Store) WithinTx(ctx context.Context, fn func(ctx context.Context, tx idemdriver.Store) error) error {
	fnFailed := false
	err := s.immediate(ctx, func(conn *sql.Conn) error {
		ts := &txStore{ex: conn, ended: new(atomic.Bool)}
		defer ts.ended.Store(true)
		if err := fn(context.WithValue(ctx, txKey{}, Executor(conn)), ts); err != nil {
			fnFailed = true
			return err
		}
		return nil
	})
	if err != nil && !fnFailed {
		return fmt.Errorf("idemsqlite: within tx: %w", err)
	}
	return err
}

// TxFrom returns the connection that [Store.WithinTx] put in ctx, inside
// its transaction, for the application's writes that must commit or roll
// back with the record's; ok is false when ctx does not come from WithinTx.
// WithinTx owns the transaction: do not run COMMIT, ROLLBACK or BEGIN on
// it (a SAVEPOINT is fine), do not use it after fn has returned, and do not
// use it from several goroutines at once.
func TxFrom(ctx context.Context) (Executor, bool) {
	ex, ok := ctx.Value(txKey{}).(Executor)
	return ex, ok
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
