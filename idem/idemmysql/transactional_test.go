package idemmysql_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemmysql"
	"github.com/unstuckhq/unstuck/idem/idemtest"
)

// The application's tables of idemtest.RunTransactional, in MySQL. InnoDB
// checks a foreign key at once, never at COMMIT.
var appSchema = []string{
	`CREATE TABLE customers (id VARCHAR(64) PRIMARY KEY) ENGINE = InnoDB`,
	`CREATE TABLE orders (
	id          BIGINT AUTO_INCREMENT PRIMARY KEY,
	note        TEXT NOT NULL,
	customer_id VARCHAR(64) NULL REFERENCES customers (id)
) ENGINE = InnoDB`,
}

// TestTransactionalConformance runs idemtest.RunTransactional (SPEC
// IDEM-H17) with the application's writes through idemmysql.TxFrom.
func TestTransactionalConformance(t *testing.T) {
	t.Parallel()
	idemtest.RunTransactional(t, newTxHarness)
}

func newTxHarness(t *testing.T) idemtest.TxHarness {
	t.Helper()
	b := setup(t)
	db, store := b.db, b.store
	for _, q := range appSchema {
		_, err := db.ExecContext(t.Context(), q)
		require.NoError(t, err)
	}
	return idemtest.TxHarness{
		Store: store,
		Name:  "idemmysql",
		InsertOrder: func(ctx context.Context, note string, customer *string) (int64, error) {
			ex, ok := idemmysql.TxFrom(ctx)
			if !ok {
				return 0, errors.New("no transaction in ctx")
			}
			res, err := ex.ExecContext(ctx, "INSERT INTO orders (note, customer_id) VALUES (?, ?)", note, customer)
			if err != nil {
				return 0, err
			}
			return res.LastInsertId()
		},
		Orders: func(ctx context.Context, note string) (int, error) {
			var n int
			err := db.QueryRowContext(ctx, "SELECT count(*) FROM orders WHERE ? = '' OR note = ?", note, note).Scan(&n)
			return n, err
		},
		AddCustomer: func(ctx context.Context, id string) error {
			_, err := db.ExecContext(ctx, "INSERT INTO customers (id) VALUES (?)", id)
			return err
		},
		NoDeferredConstraints: "InnoDB checks foreign keys at once, never at COMMIT: a handler's write that breaks one fails in the handler",
		ConnsInUse:            func() int { return db.Stats().InUse },
		ErrTxDone:             sql.ErrTxDone,
		ErrAppTxDone:          sql.ErrTxDone,
		OtherStore: func(t *testing.T) idemdriver.Store {
			other, err := idemmysql.Open(b.dsn)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, other.Close()) })
			return idemmysql.New(other)
		},
		BeginCaller: func(ctx context.Context) (idemtest.CallerTx, error) {
			// The caller's own transaction, at MySQL's default isolation
			// (REPEATABLE READ): the store must not rely on READ COMMITTED
			// inside it.
			sqltx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return idemtest.CallerTx{}, err
			}
			return idemtest.CallerTx{
				Store: store.Tx(sqltx),
				InsertOrder: func(ctx context.Context, note string) error {
					_, err := sqltx.ExecContext(ctx, "INSERT INTO orders (note) VALUES (?)", note)
					return err
				},
				Commit:   func(context.Context) error { return sqltx.Commit() },
				Rollback: func(context.Context) error { return sqltx.Rollback() },
			}, nil
		},
	}
}
