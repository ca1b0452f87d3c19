package idemmysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// txKey is the context key under which WithinTx puts its transaction.
type txKey struct{}

// WithinTx implements [idemdriver.TxStore.WithinTx] (SPEC IDEM-H17): it
// begins a READ COMMITTED transaction on the pool and calls fn with a
// context that carries it and with tx, an [idemdriver.Store] whose calls
// run inside it without beginning transactions of their own. The
// application reaches the transaction with [TxFrom] and makes its own
// writes through it, so that they and the record's writes commit together
// or not at all.
//
// WithinTx owns the transaction: if fn returns nil it commits and returns
// the commit's error; otherwise, or if fn panics, it rolls back and
// returns fn's error. The transaction is begun without ctx's cancellation,
// so that COMMIT and ROLLBACK are never cut short; each statement still
// ends with ctx.
//
// Concurrent reservations of the same key wait on InnoDB's lock of the
// unique key until the transaction that inserted it ends, then read the
// record it committed (or insert their own if it rolled back). Other keys
// do not wait: fences come from an AUTO_INCREMENT, which holds no lock
// until the end of the transaction. InnoDB may end a transaction as a
// deadlock victim (error 1213); WithinTx then returns that error, and does
// not run fn again.
//
// tx refuses every call once fn has returned, with an error wrapping
// [sql.ErrTxDone]. tx and the transaction in ctx are not safe for
// concurrent use: fn calls them from one goroutine at a time. Leases and
// retention are judged as by the Store: by the database's clock at each
// statement, or by a params struct's Now.
func (s *Store) WithinTx(ctx context.Context, fn func(ctx context.Context, tx idemdriver.Store) error) (err error) {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("idemmysql: within tx: %w", err)
	}
	sqlTx, err := s.db.BeginTx(context.WithoutCancel(ctx), &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return fmt.Errorf("idemmysql: within tx: begin: %w", err)
	}
	ts := &txStore{ex: sqlTx, ended: new(atomic.Bool)}
	committed := false
	defer func() {
		ts.ended.Store(true)
		if committed {
			return
		}
		if rerr := sqlTx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
			err = errors.Join(err, fmt.Errorf("idemmysql: within tx: rollback: %w", rerr))
		}
	}()
	if err := fn(context.WithValue(ctx, txKey{}, Executor(sqlTx)), ts); err != nil {
		return err
	}
	ts.ended.Store(true)
	committed = true
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("idemmysql: within tx: commit: %w", err)
	}
	return nil
}

// TxFrom returns the transaction that [Store.WithinTx] put in ctx, for
// the application's writes that must commit or roll back with the
// record's; ok is false when ctx does not come from WithinTx. WithinTx
// owns the transaction: do not commit or roll it back (a SAVEPOINT is
// fine), do not use it after fn has returned, and do not use it from
// several goroutines at once. Note that MySQL commits implicitly before
// and after DDL (CREATE, ALTER, DROP, TRUNCATE): such a statement in fn
// would commit the transaction half-way.
func TxFrom(ctx context.Context) (Executor, bool) {
	ex, ok := ctx.Value(txKey{}).(Executor)
	return ex, ok
}

// Tx returns the store's primitives on tx, a transaction the caller began
// on the store's database and owns, River style: every call runs inside
// it and none begins, commits or rolls back, so that the record's writes
// commit or roll back with the caller's own (the console's decision and
// its audit entry, for instance). The caller commits or rolls back.
//
// Any isolation level works: after an insert meets an existing record,
// the record is read with a locking read, which sees the latest committed
// version even under REPEATABLE READ. Once tx has ended every call fails
// with [sql.ErrTxDone]. The returned Store is not safe for concurrent use,
// as tx is not.
func (s *Store) Tx(tx *sql.Tx) idemdriver.Store {
	return &txStore{ex: tx}
}

// txStore is the idemdriver.Store of [Store.Tx] and of WithinTx's fn: the
// store's calls on one transaction. ended, set only by WithinTx, is atomic
// so that a call after fn has returned, from any goroutine, is refused
// without a data race.
type txStore struct {
	ex    Executor
	ended *atomic.Bool // nil for Tx
}

// exec returns the executor to run op on, or an error once WithinTx's fn
// has returned.
func (t *txStore) exec(op string) (Executor, error) {
	if t.ended != nil && t.ended.Load() {
		return nil, fmt.Errorf("idemmysql: %s: the transaction of WithinTx has ended: %w", op, sql.ErrTxDone)
	}
	return t.ex, nil
}

// wrap prefixes err with the call, except the sentinels callers match.
func wrap(op string, err error) error {
	if err == nil || errors.Is(err, idemdriver.ErrFenced) || errors.Is(err, idemdriver.ErrStale) {
		return err
	}
	return fmt.Errorf("idemmysql: %s: %w", op, err)
}

func (t *txStore) Reserve(ctx context.Context, p idemdriver.ReserveParams) (idemdriver.Record, bool, error) {
	ex, err := t.exec("reserve")
	if err != nil {
		return idemdriver.Record{}, false, err
	}
	rec, created, err := reserveTx(ctx, ex, p)
	return rec, created, wrap("reserve", err)
}

func (t *txStore) Takeover(ctx context.Context, p idemdriver.TakeoverParams) (idemdriver.Record, error) {
	ex, err := t.exec("takeover")
	if err != nil {
		return idemdriver.Record{}, err
	}
	rec, err := takeover(ctx, ex, p)
	return rec, wrap("takeover", err)
}

func (t *txStore) Complete(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, c idemdriver.Completion) error {
	ex, err := t.exec("complete")
	if err != nil {
		return err
	}
	return wrap("complete", complete(ctx, ex, id, o, c))
}

func (t *txStore) Annotate(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, a idemdriver.Annotation) error {
	ex, err := t.exec("annotate")
	if err != nil {
		return err
	}
	return wrap("annotate", annotate(ctx, ex, id, o, a))
}

func (t *txStore) Release(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner) error {
	ex, err := t.exec("release")
	if err != nil {
		return err
	}
	return wrap("release", release(ctx, ex, id, o))
}

func (t *txStore) Get(ctx context.Context, id idemdriver.Ident) (idemdriver.Record, bool, error) {
	ex, err := t.exec("get")
	if err != nil {
		return idemdriver.Record{}, false, err
	}
	rec, ok, _, err := read(ctx, ex, queryGet, id, time.Time{})
	return rec, ok, wrap("get", err)
}

func (t *txStore) Delete(ctx context.Context, id idemdriver.Ident) (bool, error) {
	ex, err := t.exec("delete")
	if err != nil {
		return false, err
	}
	existed, err := deleteRecord(ctx, ex, id)
	return existed, wrap("delete", err)
}

func (t *txStore) Sweep(ctx context.Context, p idemdriver.SweepParams) (idemdriver.SweepResult, error) {
	ex, err := t.exec("sweep")
	if err != nil {
		return idemdriver.SweepResult{}, err
	}
	res, err := sweep(ctx, ex, p)
	return res, wrap("sweep", err)
}

func (t *txStore) Extend(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, lease time.Duration, now time.Time) (time.Time, error) {
	ex, err := t.exec("extend")
	if err != nil {
		return time.Time{}, err
	}
	until, err := extend(ctx, ex, id, o, lease, now)
	return until, wrap("extend", err)
}

func (t *txStore) Settle(ctx context.Context, id idemdriver.Ident, st idemdriver.Settlement) (idemdriver.Record, bool, error) {
	ex, err := t.exec("settle")
	if err != nil {
		return idemdriver.Record{}, false, err
	}
	rec, ok, err := settle(ctx, ex, id, st)
	return rec, ok, wrap("settle", err)
}
