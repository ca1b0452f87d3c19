package idemsqlite_test

import (
	"database/sql"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// TestTxCallerOwnsTheTransaction: the primitives of Store.Tx run inside the
// caller's *sql.Tx (BEGIN IMMEDIATE through _txlock) and never end it:
// what they wrote is invisible outside until the caller commits, and gone
// when it rolls back; after its end the *sql.Tx refuses them.
func TestTxCallerOwnsTheTransaction(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	ctx := t.Context()
	q := url.Values{"_pragma": {"busy_timeout(10000)", "journal_mode(WAL)"}, "_txlock": {"immediate"}}
	own, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: filepath.ToSlash(b.path), RawQuery: q.Encode()}).String())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, own.Close()) })

	for i, commit := range []bool{false, true} {
		id := ident("caller-" + string(rune('a'+i)))
		sqltx, err := own.BeginTx(ctx, nil)
		require.NoError(t, err)
		tx := b.store.Tx(sqltx)
		rec, created, err := tx.Reserve(ctx, reserveParams(id, "owner-1"))
		require.NoError(t, err)
		require.True(t, created)
		_, err = sqltx.ExecContext(ctx, "INSERT INTO app_order (id) VALUES (?)", id.KeyDigest)
		require.NoError(t, err)
		require.NoError(t, tx.Complete(ctx, id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: []byte("sealed"), ResponseCode: 201}))
		got, ok, err := tx.Get(ctx, id)
		require.NoError(t, err)
		require.True(t, ok, "the transaction reads its own writes")
		require.Equal(t, idemdriver.StatusCompleted, got.Status)
		requireGone(t, b, id) // not committed yet: the calls did not commit

		if commit {
			require.NoError(t, sqltx.Commit())
			_, ok, err := b.store.Get(ctx, id)
			require.NoError(t, err)
			require.True(t, ok, "the record commits with the caller's transaction")
			require.Equal(t, 1, orders(t, b, id.KeyDigest))
		} else {
			require.NoError(t, sqltx.Rollback())
			requireGone(t, b, id)
			require.Zero(t, orders(t, b, id.KeyDigest))
		}
		_, _, err = tx.Get(ctx, id)
		require.ErrorIs(t, err, sql.ErrTxDone, "a call after the caller's transaction ended")
	}
}
