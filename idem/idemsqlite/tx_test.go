package idemsqlite_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
)

// The tests of transactional mode that every driver passes are
// idemtest.RunTransactional (transactional_test.go); here are those that
// only SQLite has.

// TestWithinTxStoreWritesWait pins the documented trap: inside fn, a write
// through the Store itself, not through tx, waits for the transaction, and
// so gives up only when its ctx ends.
func TestWithinTxStoreWritesWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	err := b.store.WithinTx(t.Context(), func(ctx context.Context, tx idemdriver.Store) error {
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_, err := b.store.Delete(short, ident("k"))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		return nil
	})
	require.NoError(t, err)
}

func TestTxFromOutsideWithinTx(t *testing.T) {
	t.Parallel()
	ex, ok := idemsqlite.TxFrom(t.Context())
	require.False(t, ok)
	require.Nil(t, ex)
}

// TestWithinTxProcessClock checks that calls inside a transaction without
// a params struct's Now judge time as the Store's do: by the process clock
// at each call. (By Now: idemtest.RunTransactional, WithinTx/ClockByNow.)
func TestWithinTxProcessClock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	err := b.store.WithinTx(t.Context(), func(ctx context.Context, tx idemdriver.Store) error {
		rec, _, err := tx.Reserve(ctx, idemdriver.ReserveParams{
			Ident: ident("fixed"), Owner: "o", Lease: time.Minute, TTL: time.Hour, Now: t0})
		require.NoError(t, err)
		// Without Now, the process clock: the lease from t0 ended long ago.
		again, err := tx.Takeover(ctx, idemdriver.TakeoverParams{Ident: rec.Ident, Seen: rec.Owner, NewOwner: "o3", Lease: time.Minute})
		require.NoError(t, err)
		require.WithinDuration(t, time.Now(), again.ReadAt, time.Minute)
		require.WithinDuration(t, time.Now(), again.UpdatedAt, time.Minute)
		return nil
	})
	require.NoError(t, err)
}

// TestWithinTxCommitError checks that a failed COMMIT is returned, wrapped:
// here the application broke the rule and committed through TxFrom.
func TestWithinTxCommitError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	err := b.store.WithinTx(t.Context(), func(ctx context.Context, tx idemdriver.Store) error {
		ex, _ := idemsqlite.TxFrom(ctx)
		_, err := ex.ExecContext(ctx, "COMMIT")
		return err
	})
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), "idemsqlite: within tx: commit: "), err.Error())
}
