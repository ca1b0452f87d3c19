package idempgx

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

// The tests of transactional mode that every driver passes are
// idemtest.RunTransactional (transactional_test.go); here are those that
// only PostgreSQL has.

// setupTx is setup plus the application's own table, app_order, that the
// tests write through TxFrom.
func setupTx(t *testing.T) testBundle {
	t.Helper()
	b := setup(t)
	b.exec(t, "CREATE TABLE app_order (id text PRIMARY KEY)")
	return b
}

// writeOrder inserts an app_order row through the transaction in ctx.
func writeOrder(ctx context.Context, id string) error {
	tx, ok := TxFrom(ctx)
	if !ok {
		return errors.New("no transaction in ctx")
	}
	_, err := tx.Exec(ctx, "INSERT INTO app_order (id) VALUES ($1)", id)
	return err
}

// orders counts the committed app_order rows with id.
func (b testBundle) orders(t *testing.T, id string) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT count(*) FROM app_order WHERE id = $1", id).Scan(&n))
	return n
}

func reserveParams(id idemdriver.Ident, owner string) idemdriver.ReserveParams {
	return idemdriver.ReserveParams{Ident: id, Fingerprint: "fp", Owner: owner, Lease: time.Minute, TTL: time.Hour}
}

func TestTxFromOutsideWithinTx(t *testing.T) {
	t.Parallel()
	tx, ok := TxFrom(t.Context())
	require.False(t, ok)
	require.Nil(t, tx)
}

// TestWithinTxAbortedStatement checks that a failed statement, which aborts
// a PostgreSQL transaction, is reported: by the call, and by the commit if
// fn returns nil regardless.
func TestWithinTxAbortedStatement(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	err := b.store.WithinTx(t.Context(), func(ctx context.Context, tx idemdriver.Store) error {
		require.NoError(t, writeOrder(ctx, "order-1"))
		_, _, err := tx.Reserve(ctx, reserveParams(idemdriver.Ident{Operation: "run", KeyDigest: strings.Repeat("a", 64)}, "o"))
		require.ErrorIs(t, err, idemdriver.ErrInvalidArgument, "a check violation is mapped inside a transaction too")
		_, _, err = tx.Get(ctx, newIdent())
		require.Error(t, err, "the transaction is aborted")
		return nil
	})
	require.ErrorIs(t, err, pgx.ErrTxCommitRollback)
	require.True(t, strings.HasPrefix(err.Error(), "idempgx: within tx: commit: "), err.Error())
	require.Zero(t, b.orders(t, "order-1"))
}

// TestWithinTxStatementClock checks that calls inside a transaction without
// a params struct's Now judge time as the Store's do: by the start of each
// statement, not of the transaction. (By Now: idemtest.RunTransactional,
// WithinTx/ClockByNow.)
func TestWithinTxStatementClock(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	err := b.store.WithinTx(t.Context(), func(ctx context.Context, tx idemdriver.Store) error {
		live, _, err := tx.Reserve(ctx, reserveParams(newIdent(), "o"))
		require.NoError(t, err)
		pgtx, _ := TxFrom(ctx)
		var txStart time.Time
		require.NoError(t, pgtx.QueryRow(ctx, "SELECT now()").Scan(&txStart))
		_, err = pgtx.Exec(ctx, "SELECT pg_sleep(0.05)")
		require.NoError(t, err)
		got, ok, err := tx.Get(ctx, live.Ident)
		require.NoError(t, err)
		require.True(t, ok)
		require.GreaterOrEqual(t, got.ReadAt.Sub(live.ReadAt), 50*time.Millisecond, "each statement reads the clock")
		require.GreaterOrEqual(t, got.ReadAt.Sub(txStart.UTC()), 50*time.Millisecond, "not the transaction's start")
		return nil
	})
	require.NoError(t, err)
}

// TestWithinTxIsReadCommitted checks that WithinTx does not inherit a
// stricter default isolation, under which a Reserve that waited for another
// transaction could not read its record.
func TestWithinTxIsReadCommitted(t *testing.T) {
	t.Parallel()
	base := pgtest.Schema(t)
	cfg := base.Config()
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "repeatable read"
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s := New(pool)
	require.NoError(t, s.Migrate(t.Context()))

	var plain string
	require.NoError(t, pgx.BeginFunc(t.Context(), pool, func(tx pgx.Tx) error {
		return tx.QueryRow(t.Context(), "SHOW transaction_isolation").Scan(&plain)
	}))
	require.Equal(t, "repeatable read", plain, "the pool's default")

	var level string
	require.NoError(t, s.WithinTx(t.Context(), func(ctx context.Context, _ idemdriver.Store) error {
		tx, _ := TxFrom(ctx)
		return tx.QueryRow(ctx, "SHOW transaction_isolation").Scan(&level)
	}))
	require.Equal(t, "read committed", level)
}
