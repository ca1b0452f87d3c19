package idempgx

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// txKey is the context key under which WithinTx puts its transaction.
type txKey struct{}

// WithinTx implements [idemdriver.TxStore.WithinTx] (SPEC IDEM-H17): it begins a
// READ COMMITTED transaction on the pool and calls fn with a context that
// carries it and with tx, an [idemdriver.Store] whose calls run inside it. The
// application reaches the transaction with [TxFrom] and makes its own
// writes through it, so that they and the record's writes commit together
// or not at all.
//
// WithinTx owns the transaction: if fn returns nil it commits, and returns
// the commit's error (a transaction that a failed statement aborted is
// rolled back by COMMIT and reported as an error wrapping
// [pgx.ErrTxCommitRollback]); otherwise, or if fn panics, it rolls back and
// returns fn's error. COMMIT and ROLLBACK run without ctx's cancellation,
// so that a cancelled request still ends the transaction on the server and
// a commit is never left in doubt by the cancellation alone.
//
// READ COMMITTED is set whatever the server's default: a Reserve that meets
// a key reserved by another uncommitted transaction waits for it, and then
// needs a fresh snapshot to read what it committed; under REPEATABLE READ it
// would fail with a serialization error instead. While the transaction is
// open, a concurrent Reserve of a key it reserved, by this process or
// another, waits on the unique index until it ends, and a write to a record
// it wrote waits on the row lock. So fn should be short and must not make
// network calls or wait for other requests: it holds a connection of the
// pool and those locks. In particular fn must not call the Store itself for
// a key it reserved through tx: that call waits for the transaction, which
// waits for fn.
//
// tx refuses every call once fn has returned, with an error wrapping
// [pgx.ErrTxClosed]. tx and the transaction in ctx are one connection and
// are not safe for concurrent use: fn calls them from one goroutine at a
// time. Leases and retention are judged as by the Store: by each
// statement's start on the database's clock, or by a params struct's Now.
// WithinTx always begins a new transaction; it does not join one that ctx
// already carries.
func (s *Store) WithinTx(ctx context.Context, fn func(ctx context.Context, tx idemdriver.Store) error) (err error) {
	pgtx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return fmt.Errorf("idempgx: within tx: begin: %w", err)
	}
	ts := &txStore{tx: pgtx, ended: new(atomic.Bool)}
	commitSent := false
	defer func() {
		ts.ended.Store(true)
		if commitSent {
			return // a failed COMMIT ends the transaction too
		}
		// Rollback also returns the connection to the pool, so it runs even
		// on a connection that pgx closed (on a cancelled statement, for
		// instance): that one took its transaction with it, and its
		// rollback error says nothing more.
		closed := pgtx.Conn().IsClosed()
		if rerr := pgtx.Rollback(context.WithoutCancel(ctx)); rerr != nil && !closed {
			err = errors.Join(err, fmt.Errorf("idempgx: within tx: rollback: %w", rerr))
		}
	}()
	if err := fn(context.WithValue(ctx, txKey{}, pgtx), ts); err != nil {
		return err
	}
	ts.ended.Store(true)
	commitSent = true
	if err := pgtx.Commit(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("idempgx: within tx: commit: %w", err)
	}
	return nil
}

// TxFrom returns the transaction that [Store.WithinTx] put in ctx, for the
// application's writes that must commit or roll back with the record's;
// ok is false when ctx does not come from WithinTx. WithinTx owns the
// transaction: do not commit or roll it back (a savepoint with its Begin is
// fine), do not use it after fn has returned, and do not use it from
// several goroutines at once.
func TxFrom(ctx context.Context) (pgx.Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(pgx.Tx)
	return tx, ok
}

// Tx returns the store's primitives on tx, a transaction the caller began
// on the store's database and owns, River style: every call runs inside tx
// and none begins, commits or rolls back, so that the record's writes
// commit or roll back with the caller's own (the console's decision and its
// audit entry, for instance). The caller commits or rolls back tx.
//
// tx should be READ COMMITTED, for the reason [Store.WithinTx] gives. Once
// tx has ended, every call fails with pgx's error for it (wrapping
// [pgx.ErrTxClosed]). As in WithinTx, a call waits for row locks and unique
// index entries that other transactions hold, and the returned Store is
// not safe for concurrent use, as tx is not. Leases and retention are
// judged as by the Store.
func (s *Store) Tx(tx pgx.Tx) idemdriver.Store {
	return &txStore{tx: tx}
}

// txStore is the idemdriver.Store of [Store.Tx] and of WithinTx's fn: the
// store's calls on one transaction. It is not safe for concurrent use, as
// pgx.Tx is not. ended, set only by WithinTx, is atomic so that a call
// after fn has returned, from any goroutine, is refused without a data
// race; a caller's own transaction refuses calls after its end itself.
type txStore struct {
	tx    pgx.Tx
	ended *atomic.Bool // nil for Tx
}

// db returns the transaction to run op on, or an error once WithinTx's fn
// has returned.
func (t *txStore) db(op string) (dbtx, error) {
	if t.ended != nil && t.ended.Load() {
		return nil, fmt.Errorf("idempgx: %s: the transaction of WithinTx has ended: %w", op, pgx.ErrTxClosed)
	}
	return t.tx, nil
}

func (t *txStore) Reserve(ctx context.Context, p idemdriver.ReserveParams) (idemdriver.Record, bool, error) {
	db, err := t.db("reserve")
	if err != nil {
		return idemdriver.Record{}, false, err
	}
	return reserve(ctx, db, p)
}

func (t *txStore) Takeover(ctx context.Context, p idemdriver.TakeoverParams) (idemdriver.Record, error) {
	db, err := t.db("takeover")
	if err != nil {
		return idemdriver.Record{}, err
	}
	return takeover(ctx, db, p)
}

func (t *txStore) Complete(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, c idemdriver.Completion) error {
	db, err := t.db("complete")
	if err != nil {
		return err
	}
	return complete(ctx, db, id, o, c)
}

func (t *txStore) Annotate(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, a idemdriver.Annotation) error {
	db, err := t.db("annotate")
	if err != nil {
		return err
	}
	return annotate(ctx, db, id, o, a)
}

func (t *txStore) Release(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner) error {
	db, err := t.db("release")
	if err != nil {
		return err
	}
	return release(ctx, db, id, o)
}

func (t *txStore) Get(ctx context.Context, id idemdriver.Ident) (idemdriver.Record, bool, error) {
	db, err := t.db("get")
	if err != nil {
		return idemdriver.Record{}, false, err
	}
	return get(ctx, db, id)
}

func (t *txStore) Delete(ctx context.Context, id idemdriver.Ident) (bool, error) {
	db, err := t.db("delete")
	if err != nil {
		return false, err
	}
	return deleteRecord(ctx, db, id)
}

func (t *txStore) Sweep(ctx context.Context, p idemdriver.SweepParams) (idemdriver.SweepResult, error) {
	db, err := t.db("sweep")
	if err != nil {
		return idemdriver.SweepResult{}, err
	}
	return sweep(ctx, db, p)
}

func (t *txStore) Extend(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, lease time.Duration, now time.Time) (time.Time, error) {
	db, err := t.db("extend")
	if err != nil {
		return time.Time{}, err
	}
	return extend(ctx, db, id, o, lease, now)
}

func (t *txStore) Settle(ctx context.Context, id idemdriver.Ident, st idemdriver.Settlement) (idemdriver.Record, bool, error) {
	db, err := t.db("settle")
	if err != nil {
		return idemdriver.Record{}, false, err
	}
	return settle(ctx, db, id, st)
}
