package idempgx_test

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idempgx"
	"github.com/unstuckhq/unstuck/idem/idemtest"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

// The application's tables of idemtest.RunTransactional, in PostgreSQL.
const appSchema = `
CREATE TABLE customers (id text PRIMARY KEY);
CREATE TABLE orders (
	id          bigserial PRIMARY KEY,
	note        text NOT NULL,
	customer_id text REFERENCES customers (id) DEFERRABLE INITIALLY DEFERRED
);`

func TestTransactionalConformance(t *testing.T) {
	idemtest.RunTransactional(t, newTxHarness)
}

// newTxHarness is a migrated store on a schema of its own, with the
// application's tables, written through idempgx.TxFrom.
func newTxHarness(t *testing.T) idemtest.TxHarness {
	t.Helper()
	pool := pgtest.Schema(t)
	store := idempgx.New(pool)
	require.NoError(t, store.Migrate(t.Context()))
	_, err := pool.Exec(t.Context(), appSchema)
	require.NoError(t, err)
	return idemtest.TxHarness{
		Store: store,
		Name:  "idempgx",
		InsertOrder: func(ctx context.Context, note string, customer *string) (int64, error) {
			tx, ok := idempgx.TxFrom(ctx)
			if !ok {
				return 0, errors.New("no transaction in ctx")
			}
			var id int64
			err := tx.QueryRow(ctx, "INSERT INTO orders (note, customer_id) VALUES ($1, $2) RETURNING id", note, customer).Scan(&id)
			return id, err
		},
		Orders: func(ctx context.Context, note string) (int, error) {
			var n int
			err := pool.QueryRow(ctx, "SELECT count(*) FROM orders WHERE $1 = '' OR note = $1", note).Scan(&n)
			return n, err
		},
		AddCustomer: func(ctx context.Context, id string) error {
			_, err := pool.Exec(ctx, "INSERT INTO customers (id) VALUES ($1)", id)
			return err
		},
		ConnsInUse: func() int { return int(pool.Stat().AcquiredConns()) },
		ErrTxDone:  pgx.ErrTxClosed,
		OtherStore: func(t *testing.T) idemdriver.Store {
			other, err := pgxpool.NewWithConfig(t.Context(), pool.Config())
			require.NoError(t, err)
			t.Cleanup(other.Close)
			return idempgx.New(other)
		},
		// Sessions blocked by the transaction's backend.
		Waiters: func(ctx, txCtx context.Context) (int, error) {
			tx, ok := idempgx.TxFrom(txCtx)
			if !ok {
				return 0, errors.New("no transaction in txCtx")
			}
			var pid int32
			if err := tx.QueryRow(txCtx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
				return 0, err
			}
			var n int
			err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))", pid).Scan(&n)
			return n, err
		},
		BeginCaller: func(ctx context.Context) (idemtest.CallerTx, error) {
			pgtx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
			if err != nil {
				return idemtest.CallerTx{}, err
			}
			return idemtest.CallerTx{
				Store: store.Tx(pgtx),
				InsertOrder: func(ctx context.Context, note string) error {
					_, err := pgtx.Exec(ctx, "INSERT INTO orders (note) VALUES ($1)", note)
					return err
				},
				Commit:   pgtx.Commit,
				Rollback: pgtx.Rollback,
			}, nil
		},
		HoldCommit: func(t *testing.T) (func() bool, func()) { return holdCommit(t, pool) },
	}
}

// holdCommit makes COMMIT slow: a deferred constraint trigger on orders
// waits, at COMMIT, for an advisory lock that the test holds until
// release.
func holdCommit(t *testing.T, pool *pgxpool.Pool) (committing func() bool, release func()) {
	t.Helper()
	lockKey := mrand.Int64() // advisory locks are per database: one of its own
	_, err := pool.Exec(t.Context(), `
CREATE FUNCTION orders_commit_gate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_advisory_xact_lock(TG_ARGV[0]::bigint);
	RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER orders_commit_gate AFTER INSERT ON orders
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
	EXECUTE FUNCTION orders_commit_gate('`+fmt.Sprint(lockKey)+`');`)
	require.NoError(t, err)

	holder, err := pool.Acquire(t.Context())
	require.NoError(t, err)
	var pid int32
	require.NoError(t, holder.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&pid))
	_, err = holder.Exec(t.Context(), "SELECT pg_advisory_lock($1)", lockKey)
	require.NoError(t, err)
	locked := true
	release = func() {
		if locked {
			_, err := holder.Exec(context.WithoutCancel(t.Context()), "SELECT pg_advisory_unlock($1)", lockKey)
			require.NoError(t, err)
			locked = false
		}
	}
	t.Cleanup(func() {
		release()
		holder.Release()
	})
	committing = func() bool {
		var waiting string
		err := pool.QueryRow(t.Context(),
			"SELECT query FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))", pid).Scan(&waiting)
		return err == nil && strings.ToLower(strings.TrimSpace(waiting)) == "commit"
	}
	return committing, release
}
