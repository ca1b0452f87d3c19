package idemmysql

import (
	"context"
	"database/sql"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/internal/sqlstore"
)

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
func (s *Store) WithinTx(ctx context.Context, fn func(ctx context.Context, tx idemdriver.Store) error) error {
	return sqlstore.WithinTx(ctx, driverName, ops{}, func(ctx context.Context, fn func(tx *sql.Tx) error) error {
		return sqlstore.InTx(ctx, s.db, readCommitted, "", fn)
	}, fn)
}

// TxFrom returns the transaction that [Store.WithinTx] put in ctx, for
// the application's writes that must commit or roll back with the
// record's; ok is false when ctx does not come from WithinTx. WithinTx
// owns the transaction: do not commit or roll it back (a SAVEPOINT is
// fine), do not use it after fn has returned, and do not use it from
// several goroutines at once. Note that MySQL commits implicitly before
// and after DDL (CREATE, ALTER, DROP, TRUNCATE): such a statement in fn
// would commit the transaction half-way.
func TxFrom(ctx context.Context) (*sql.Tx, bool) {
	return sqlstore.TxFrom(ctx)
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
	return sqlstore.NewTxStore(driverName, ops{}, tx)
}

// ops are the store's primitives on one executor ([sqlstore.Ops]), for
// the Store of a transaction: leases and retention judged by the
// database's clock at each statement, or by a params struct's Now.
type ops struct{}

func (ops) Reserve(ctx context.Context, ex Executor, p idemdriver.ReserveParams) (idemdriver.Record, bool, error) {
	return reserveTx(ctx, ex, p)
}

func (ops) Get(ctx context.Context, ex Executor, id idemdriver.Ident) (idemdriver.Record, bool, error) {
	rec, ok, _, err := read(ctx, ex, queryGet, id, time.Time{})
	return rec, ok, err
}

// driverName prefixes the errors of the store's calls.
const driverName = "idemmysql"
