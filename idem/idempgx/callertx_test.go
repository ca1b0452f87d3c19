package idempgx

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// TestTxCallerOwnsTheTransaction: the primitives of Store.Tx run inside the
// caller's transaction and never end it: what they wrote is invisible
// outside until the caller commits, and gone when it rolls back; after
// its end the native transaction refuses them.
func TestTxCallerOwnsTheTransaction(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	ctx := t.Context()

	for _, commit := range []bool{false, true} {
		id := newIdent()
		pgtx, err := b.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
		require.NoError(t, err)
		tx := b.store.Tx(pgtx)
		rec, created, err := tx.Reserve(ctx, reserveParams(id, "owner-1"))
		require.NoError(t, err)
		require.True(t, created)
		_, err = pgtx.Exec(ctx, "INSERT INTO app_order (id) VALUES ($1)", id.KeyDigest)
		require.NoError(t, err)
		require.NoError(t, tx.Complete(ctx, id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: []byte("sealed"), ResponseCode: 201}))
		got, ok, err := tx.Get(ctx, id)
		require.NoError(t, err)
		require.True(t, ok, "the transaction reads its own writes")
		require.Equal(t, idemdriver.StatusCompleted, got.Status)
		b.requireGone(t, id) // not committed yet: the calls did not commit

		if commit {
			require.NoError(t, pgtx.Commit(ctx))
			_, ok, err := b.store.Get(ctx, id)
			require.NoError(t, err)
			require.True(t, ok, "the record commits with the caller's transaction")
			require.Equal(t, 1, b.orders(t, id.KeyDigest))
		} else {
			require.NoError(t, pgtx.Rollback(ctx))
			b.requireGone(t, id)
			require.Zero(t, b.orders(t, id.KeyDigest))
		}
		_, _, err = tx.Get(ctx, id)
		require.ErrorIs(t, err, pgx.ErrTxClosed, "a call after the caller's transaction ended")
	}
}
