package idemsqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/idem/idemtest"
)

// The application's tables of idemtest.RunTransactional, in SQLite; the
// foreign key is checked at COMMIT (idemsqlite.Open turns foreign keys
// on).
const appSchema = `
CREATE TABLE customers (id TEXT PRIMARY KEY);
CREATE TABLE orders (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	note        TEXT NOT NULL,
	customer_id TEXT REFERENCES customers (id) DEFERRABLE INITIALLY DEFERRED
);`

func TestTransactionalConformance(t *testing.T) {
	idemtest.RunTransactional(t, newTxHarness)
}

// newTxHarness is a migrated store on a database file of its own, with
// the application's tables, written through idemsqlite.TxFrom. SQLite
// cannot hold a COMMIT, so HoldCommit is left out.
func newTxHarness(t *testing.T) idemtest.TxHarness {
	t.Helper()
	b := setup(t)
	db, store := b.db, b.store
	_, err := db.ExecContext(t.Context(), appSchema)
	require.NoError(t, err)
	return idemtest.TxHarness{
		Store: store,
		Name:  "idemsqlite",
		InsertOrder: func(ctx context.Context, note string, customer *string) (int64, error) {
			ex, ok := idemsqlite.TxFrom(ctx)
			if !ok {
				return 0, errors.New("no transaction in ctx")
			}
			var id int64
			err := ex.QueryRowContext(ctx, "INSERT INTO orders (note, customer_id) VALUES (?, ?) RETURNING id", note, customer).Scan(&id)
			return id, err
		},
		Orders: func(ctx context.Context, note string) (int, error) {
			var n int
			err := db.QueryRowContext(ctx, "SELECT count(*) FROM orders WHERE ?1 = '' OR note = ?1", note).Scan(&n)
			return n, err
		},
		AddCustomer: func(ctx context.Context, id string) error {
			_, err := db.ExecContext(ctx, "INSERT INTO customers (id) VALUES (?)", id)
			return err
		},
		ConnsInUse:   func() int { return db.Stats().InUse },
		ErrTxDone:    sql.ErrTxDone,
		ErrAppTxDone: sql.ErrTxDone, // the transaction in a kept context has ended
		OtherStore: func(t *testing.T) idemdriver.Store {
			other, err := idemsqlite.Open(b.path)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, other.Close()) })
			return idemsqlite.New(other)
		},
		// A caller's own handle begins BEGIN IMMEDIATE through _txlock.
		BeginCaller: func(ctx context.Context) (idemtest.CallerTx, error) {
			q := url.Values{"_pragma": {"busy_timeout(10000)", "journal_mode(WAL)"}, "_txlock": {"immediate"}}
			own, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: filepath.ToSlash(b.path), RawQuery: q.Encode()}).String())
			if err != nil {
				return idemtest.CallerTx{}, err
			}
			t.Cleanup(func() { require.NoError(t, own.Close()) })
			sqltx, err := own.BeginTx(ctx, nil)
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
