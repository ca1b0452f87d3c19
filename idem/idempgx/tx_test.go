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

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/pgtest"
)

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

// requireGone fails t if a record exists for id.
func (b testBundle) requireGone(t *testing.T, id idemdriver.Ident) {
	t.Helper()
	_, ok, err := b.store.Get(t.Context(), id)
	require.NoError(t, err)
	require.False(t, ok, "record %v exists", id)
}

func reserveParams(id idemdriver.Ident, owner string) idemdriver.ReserveParams {
	return idemdriver.ReserveParams{Ident: id, Fingerprint: "fp", Owner: owner, Lease: time.Minute, TTL: time.Hour}
}

func TestWithinTxCommits(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	id := newIdent()

	err := b.store.WithinTx(t.Context(), func(ctx context.Context, tx idemdriver.Store) error {
		rec, created, err := tx.Reserve(ctx, reserveParams(id, "owner-1"))
		require.NoError(t, err)
		require.True(t, created)
		require.NoError(t, writeOrder(ctx, "order-1"))
		require.NoError(t, tx.Annotate(ctx, id, rec.Owner, idemdriver.Annotation{ResourceIDs: []string{"order-1"}}))
		require.NoError(t, tx.Complete(ctx, id, rec.Owner, idemdriver.Completion{
			Status: idemdriver.StatusCompleted, Result: []byte("sealed"), ResponseCode: 201}))

		got, ok, err := tx.Get(ctx, id)
		require.NoError(t, err)
		require.True(t, ok, "the transaction reads its own writes")
		require.Equal(t, idemdriver.StatusCompleted, got.Status)

		// Nothing is visible outside before the commit.
		b.requireGone(t, id)
		require.Zero(t, b.orders(t, "order-1"))
		return nil
	})
	require.NoError(t, err)

	got := b.get(t, id)
	require.Equal(t, idemdriver.StatusCompleted, got.Status)
	require.Equal(t, []byte("sealed"), got.Result)
	require.Equal(t, []string{"order-1"}, got.ResourceIDs)
	require.Equal(t, 1, b.orders(t, "order-1"))
}

func TestWithinTxRollsBack(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	id := newIdent()
	errApp := errors.New("the application failed")

	err := b.store.WithinTx(t.Context(), func(ctx context.Context, tx idemdriver.Store) error {
		_, created, err := tx.Reserve(ctx, reserveParams(id, "owner-1"))
		require.NoError(t, err)
		require.True(t, created)
		require.NoError(t, writeOrder(ctx, "order-1"))
		return errApp
	})
	require.ErrorIs(t, err, errApp)
	require.Equal(t, errApp, err, "fn's error is returned as is")
	b.requireGone(t, id)
	require.Zero(t, b.orders(t, "order-1"))
}

func TestWithinTxRollsBackOnPanic(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	id := newIdent()

	require.PanicsWithValue(t, "boom", func() {
		_ = b.store.WithinTx(t.Context(), func(ctx context.Context, tx idemdriver.Store) error {
			_, _, err := tx.Reserve(ctx, reserveParams(id, "owner-1"))
			require.NoError(t, err)
			require.NoError(t, writeOrder(ctx, "order-1"))
			panic("boom")
		})
	})
	b.requireGone(t, id)
	require.Zero(t, b.orders(t, "order-1"))
	// The connection went back to the pool: the schema's cleanup, which
	// closes the pool, would otherwise wait for it.
	require.Zero(t, b.pool.Stat().AcquiredConns())
}

// TestWithinTxOutsiderWaits has a plain Reserve of a key that an open
// WithinTx reserved: it waits on the unique index until the transaction
// ends, then returns the committed record, or creates its own after a
// rollback.
func TestWithinTxOutsiderWaits(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		name := map[bool]string{true: "Commit", false: "Rollback"}[commit]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupTx(t)
			id := newIdent()
			errApp := errors.New("the application failed")
			type outcome struct {
				rec     idemdriver.Record
				created bool
				err     error
			}
			outsider := make(chan outcome, 1)

			err := b.store.WithinTx(t.Context(), func(ctx context.Context, tx idemdriver.Store) error {
				rec, created, err := tx.Reserve(ctx, reserveParams(id, "insider"))
				require.NoError(t, err)
				require.True(t, created)
				require.NoError(t, writeOrder(ctx, "order-1"))
				pgtx, ok := TxFrom(ctx)
				require.True(t, ok)
				var pid int32
				require.NoError(t, pgtx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))

				go func() {
					rec, created, err := b.store.Reserve(t.Context(), reserveParams(id, "outsider"))
					outsider <- outcome{rec, created, err}
				}()
				require.Eventually(t, func() bool {
					var n int
					err := b.pool.QueryRow(t.Context(),
						"SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))", pid).Scan(&n)
					return err == nil && n == 1
				}, 10*time.Second, 5*time.Millisecond, "the outsider waits for this transaction")
				select {
				case o := <-outsider:
					t.Fatalf("the outsider returned before the transaction ended: %+v", o)
				default:
				}

				require.NoError(t, tx.Complete(ctx, id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: []byte("r")}))
				if !commit {
					return errApp
				}
				return nil
			})
			o := <-outsider
			require.NoError(t, o.err)
			if commit {
				require.NoError(t, err)
				require.False(t, o.created, "the outsider finds the committed record")
				require.Equal(t, idemdriver.StatusCompleted, o.rec.Status)
				require.Equal(t, "insider", o.rec.Token)
				require.Equal(t, []byte("r"), o.rec.Result)
				require.Equal(t, 1, b.orders(t, "order-1"))
				return
			}
			require.ErrorIs(t, err, errApp)
			require.True(t, o.created, "the outsider creates the record after the rollback")
			require.Equal(t, idemdriver.StatusProcessing, o.rec.Status)
			require.Equal(t, "outsider", o.rec.Token)
			require.Zero(t, b.orders(t, "order-1"))
		})
	}
}

func TestTxFromOutsideWithinTx(t *testing.T) {
	t.Parallel()
	tx, ok := TxFrom(t.Context())
	require.False(t, ok)
	require.Nil(t, tx)
}

func TestTxStoreRefusesCallsAfterFn(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		b := setupTx(t)
		id := newIdent()
		var kept idemdriver.Store
		var keptCtx context.Context
		var rec idemdriver.Record
		errApp := errors.New("the application failed")
		err := b.store.WithinTx(t.Context(), func(ctx context.Context, tx idemdriver.Store) error {
			kept, keptCtx = tx, ctx
			var err error
			rec, _, err = tx.Reserve(ctx, reserveParams(id, "owner-1"))
			require.NoError(t, err)
			if !commit {
				return errApp
			}
			return nil
		})
		if commit {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, errApp)
		}

		ctx := t.Context()
		_, _, err = kept.Reserve(ctx, reserveParams(newIdent(), "late"))
		require.ErrorIs(t, err, pgx.ErrTxClosed, "reserve")
		require.ErrorContains(t, err, "the transaction of WithinTx has ended")
		_, err = kept.Takeover(ctx, idemdriver.TakeoverParams{Ident: id, Seen: rec.Owner, NewOwner: "late", Lease: time.Minute})
		require.ErrorIs(t, err, pgx.ErrTxClosed, "takeover")
		err = kept.Complete(ctx, id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted})
		require.ErrorIs(t, err, pgx.ErrTxClosed, "complete")
		err = kept.Annotate(ctx, id, rec.Owner, idemdriver.Annotation{CorrelationID: "c"})
		require.ErrorIs(t, err, pgx.ErrTxClosed, "annotate")
		err = kept.Release(ctx, id, rec.Owner)
		require.ErrorIs(t, err, pgx.ErrTxClosed, "release")
		_, _, err = kept.Get(ctx, id)
		require.ErrorIs(t, err, pgx.ErrTxClosed, "get")
		_, err = kept.Delete(ctx, id)
		require.ErrorIs(t, err, pgx.ErrTxClosed, "delete")
		_, err = kept.Sweep(ctx, idemdriver.SweepParams{})
		require.ErrorIs(t, err, pgx.ErrTxClosed, "sweep")
		require.True(t, strings.HasPrefix(err.Error(), "idempgx: sweep: "), err.Error())

		require.Error(t, writeOrder(keptCtx, "late"), "the transaction in a kept context is closed too")

		// Nothing the late calls tried happened.
		if commit {
			got := b.get(t, id)
			require.Equal(t, idemdriver.StatusProcessing, got.Status)
			require.Equal(t, rec.Owner, got.Owner)
		} else {
			b.requireGone(t, id)
		}
		require.Zero(t, b.orders(t, "late"))
	}
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
		require.ErrorIs(t, err, idem.ErrInvalidKey, "a check violation is mapped inside a transaction too")
		_, _, err = tx.Get(ctx, newIdent())
		require.Error(t, err, "the transaction is aborted")
		return nil
	})
	require.ErrorIs(t, err, pgx.ErrTxCommitRollback)
	require.True(t, strings.HasPrefix(err.Error(), "idempgx: within tx: commit: "), err.Error())
	require.Zero(t, b.orders(t, "order-1"))
}

// TestWithinTxClock checks that calls inside a transaction judge time as
// the Store's do: by a params struct's Now, else by the start of each
// statement, not of the transaction.
func TestWithinTxClock(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	err := b.store.WithinTx(t.Context(), func(ctx context.Context, tx idemdriver.Store) error {
		rec, _, err := tx.Reserve(ctx, idemdriver.ReserveParams{
			Ident: newIdent(), Owner: "o", Lease: time.Minute, TTL: time.Hour, Now: t0})
		require.NoError(t, err)
		require.Equal(t, t0, rec.ReadAt)
		require.Equal(t, t0, rec.CreatedAt)
		require.Equal(t, t0.Add(time.Minute), rec.LeaseExpiresAt)

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

		// The lease is judged at the takeover's own time: at t0 + 59 s the
		// lease from t0 is live, at t0 + 61 s it has ended.
		_, err = tx.Takeover(ctx, idemdriver.TakeoverParams{Ident: rec.Ident, Seen: rec.Owner, NewOwner: "o2", Lease: time.Minute, Now: t0.Add(59 * time.Second)})
		require.ErrorIs(t, err, idemdriver.ErrFenced)
		taken, err := tx.Takeover(ctx, idemdriver.TakeoverParams{Ident: rec.Ident, Seen: rec.Owner, NewOwner: "o2", Lease: time.Minute, Now: t0.Add(61 * time.Second)})
		require.NoError(t, err)
		require.Equal(t, t0.Add(61*time.Second), taken.ReadAt)
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

func TestWithinTxCancelled(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	id := newIdent()
	ctx, cancel := context.WithCancel(t.Context())
	err := b.store.WithinTx(ctx, func(ctx context.Context, tx idemdriver.Store) error {
		_, _, err := tx.Reserve(ctx, reserveParams(id, "o"))
		require.NoError(t, err)
		require.NoError(t, writeOrder(ctx, "order-1"))
		cancel()
		return writeOrder(ctx, "order-2")
	})
	require.ErrorIs(t, err, context.Canceled)
	b.requireGone(t, id)
	require.Zero(t, b.orders(t, "order-1"))
	require.Zero(t, b.pool.Stat().AcquiredConns(), "the connection went back to the pool")

	err = b.store.WithinTx(ctx, func(context.Context, idemdriver.Store) error {
		t.Fatal("fn called with a cancelled context")
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, strings.HasPrefix(err.Error(), "idempgx: within tx: begin: "), err.Error())
}
