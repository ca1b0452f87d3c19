package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// Ops are a dialect's record primitives on one Executor, as the Store of a
// transaction runs them: none begins, commits or rolls back. Errors are
// not prefixed; [TxStore] adds "<driver>: <call>".
type Ops interface {
	Reserve(ctx context.Context, ex Executor, p idemdriver.ReserveParams) (idemdriver.Record, bool, error)
	Takeover(ctx context.Context, ex Executor, p idemdriver.TakeoverParams) (idemdriver.Record, error)
	Complete(ctx context.Context, ex Executor, id idemdriver.Ident, o idemdriver.Owner, c idemdriver.Completion) error
	Annotate(ctx context.Context, ex Executor, id idemdriver.Ident, o idemdriver.Owner, a idemdriver.Annotation) error
	Extend(ctx context.Context, ex Executor, id idemdriver.Ident, o idemdriver.Owner, lease time.Duration, now time.Time) (time.Time, error)
	// Get reads the record for id, judged by the clock of a call
	// without a params struct.
	Get(ctx context.Context, ex Executor, id idemdriver.Ident) (idemdriver.Record, bool, error)
	Settle(ctx context.Context, ex Executor, id idemdriver.Ident, st idemdriver.Settlement) (idemdriver.Record, bool, error)
	Sweep(ctx context.Context, ex Executor, p idemdriver.SweepParams) (idemdriver.SweepResult, error)
}

// txKey is the context key under which WithinTx puts its transaction.
type txKey struct{}

// TxFrom returns the transaction that [WithinTx] put in ctx; ok is false
// when ctx does not come from WithinTx.
func TxFrom(ctx context.Context) (*sql.Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(*sql.Tx)
	return tx, ok
}

// WithinTx is a driver's [idemdriver.TxStore.WithinTx]: begin runs its
// argument in a transaction the dialect begins (see [InTx]) and commits
// when it returns nil; WithinTx calls fn in it, with a context that
// carries the transaction ([TxFrom]) and a [TxStore] on it that refuses
// every call once fn has returned. fn's error is returned as it is; an
// error of the transaction's own (begin, commit) is prefixed with
// "<name>: within tx".
func WithinTx(ctx context.Context, name string, ops Ops, begin func(ctx context.Context, fn func(tx *sql.Tx) error) error,
	fn func(ctx context.Context, tx idemdriver.Store) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: within tx: %w", name, err)
	}
	fnFailed := false
	err := begin(ctx, func(sqlTx *sql.Tx) error {
		ts := &TxStore{name: name, ops: ops, ex: sqlTx, ended: new(atomic.Bool)}
		defer ts.ended.Store(true)
		if err := fn(context.WithValue(ctx, txKey{}, sqlTx), ts); err != nil {
			fnFailed = true
			return err
		}
		return nil
	})
	if err != nil && !fnFailed {
		return fmt.Errorf("%s: within tx: %w", name, err)
	}
	return err
}

// TxStore is the idemdriver.Store of a driver's Tx and of WithinTx's fn:
// the dialect's calls on one transaction. It is not safe for concurrent
// use. ended, set only by WithinTx, is atomic so that a call after fn has
// returned, from any goroutine, is refused without a data race.
type TxStore struct {
	name  string
	ops   Ops
	ex    Executor
	ended *atomic.Bool // nil for NewTxStore
}

// NewTxStore returns the Store of a transaction the caller owns: driver
// name's ops on tx.
func NewTxStore(name string, ops Ops, tx *sql.Tx) *TxStore {
	return &TxStore{name: name, ops: ops, ex: tx}
}

// exec returns the executor to run op on, or an error once WithinTx's fn
// has returned.
func (t *TxStore) exec(op string) (Executor, error) {
	if t.ended != nil && t.ended.Load() {
		return nil, fmt.Errorf("%s: %s: the transaction of WithinTx has ended: %w", t.name, op, sql.ErrTxDone)
	}
	return t.ex, nil
}

// wrap is [Wrap] with the store's driver name.
func (t *TxStore) wrap(op string, err error) error { return Wrap(t.name, op, err) }

// Wrap prefixes err with the driver's name and the call ("idemsqlite:
// complete: …"), except nil and the sentinels callers match
// (idemdriver.ErrFenced, idemdriver.ErrStale), which it returns as they
// are.
func Wrap(name, op string, err error) error {
	if err == nil || errors.Is(err, idemdriver.ErrFenced) || errors.Is(err, idemdriver.ErrStale) {
		return err
	}
	return fmt.Errorf("%s: %s: %w", name, op, err)
}

// Reserve implements [idemdriver.Store.Reserve].
func (t *TxStore) Reserve(ctx context.Context, p idemdriver.ReserveParams) (idemdriver.Record, bool, error) {
	ex, err := t.exec("reserve")
	if err != nil {
		return idemdriver.Record{}, false, err
	}
	rec, created, err := t.ops.Reserve(ctx, ex, p)
	return rec, created, t.wrap("reserve", err)
}

// Takeover implements [idemdriver.Store.Takeover].
func (t *TxStore) Takeover(ctx context.Context, p idemdriver.TakeoverParams) (idemdriver.Record, error) {
	ex, err := t.exec("takeover")
	if err != nil {
		return idemdriver.Record{}, err
	}
	rec, err := t.ops.Takeover(ctx, ex, p)
	return rec, t.wrap("takeover", err)
}

// Complete implements [idemdriver.Store.Complete].
func (t *TxStore) Complete(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, c idemdriver.Completion) error {
	ex, err := t.exec("complete")
	if err != nil {
		return err
	}
	return t.wrap("complete", t.ops.Complete(ctx, ex, id, o, c))
}

// Annotate implements [idemdriver.Store.Annotate].
func (t *TxStore) Annotate(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, a idemdriver.Annotation) error {
	ex, err := t.exec("annotate")
	if err != nil {
		return err
	}
	return t.wrap("annotate", t.ops.Annotate(ctx, ex, id, o, a))
}

// Release implements [idemdriver.Store.Release].
func (t *TxStore) Release(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner) error {
	ex, err := t.exec("release")
	if err != nil {
		return err
	}
	return t.wrap("release", Release(ctx, ex, id, o))
}

// Get implements [idemdriver.Store.Get]; it sees the transaction's own
// writes.
func (t *TxStore) Get(ctx context.Context, id idemdriver.Ident) (idemdriver.Record, bool, error) {
	ex, err := t.exec("get")
	if err != nil {
		return idemdriver.Record{}, false, err
	}
	rec, ok, err := t.ops.Get(ctx, ex, id)
	return rec, ok, t.wrap("get", err)
}

// Delete implements [idemdriver.Store.Delete].
func (t *TxStore) Delete(ctx context.Context, id idemdriver.Ident) (bool, error) {
	ex, err := t.exec("delete")
	if err != nil {
		return false, err
	}
	existed, err := DeleteRecord(ctx, ex, id)
	return existed, t.wrap("delete", err)
}

// Sweep implements [idemdriver.Store.Sweep].
func (t *TxStore) Sweep(ctx context.Context, p idemdriver.SweepParams) (idemdriver.SweepResult, error) {
	ex, err := t.exec("sweep")
	if err != nil {
		return idemdriver.SweepResult{}, err
	}
	res, err := t.ops.Sweep(ctx, ex, p)
	return res, t.wrap("sweep", err)
}

// Extend implements [idemdriver.Store.Extend].
func (t *TxStore) Extend(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, lease time.Duration, now time.Time) (time.Time, error) {
	ex, err := t.exec("extend")
	if err != nil {
		return time.Time{}, err
	}
	until, err := t.ops.Extend(ctx, ex, id, o, lease, now)
	return until, t.wrap("extend", err)
}

// Settle implements [idemdriver.Store.Settle].
func (t *TxStore) Settle(ctx context.Context, id idemdriver.Ident, st idemdriver.Settlement) (idemdriver.Record, bool, error) {
	ex, err := t.exec("settle")
	if err != nil {
		return idemdriver.Record{}, false, err
	}
	rec, ok, err := t.ops.Settle(ctx, ex, id, st)
	return rec, ok, t.wrap("settle", err)
}
