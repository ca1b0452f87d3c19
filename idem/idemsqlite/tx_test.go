package idemsqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
)

// setupTx is setup plus the application's own table, app_order, that the
// tests write through TxFrom.
func setupTx(t *testing.T) *testBundle {
	t.Helper()
	b := setup(t)
	_, err := b.db.ExecContext(t.Context(), "CREATE TABLE app_order (id TEXT PRIMARY KEY)")
	require.NoError(t, err)
	return b
}

// writeOrder inserts an app_order row through the transaction in ctx.
func writeOrder(ctx context.Context, id string) error {
	ex, ok := idemsqlite.TxFrom(ctx)
	if !ok {
		return errors.New("no transaction in ctx")
	}
	_, err := ex.ExecContext(ctx, "INSERT INTO app_order (id) VALUES (?)", id)
	return err
}

// orders counts the committed app_order rows with id.
func orders(t *testing.T, b *testBundle, id string) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.QueryRowContext(t.Context(), "SELECT count(*) FROM app_order WHERE id = ?", id).Scan(&n))
	return n
}

func requireGone(t *testing.T, b *testBundle, id idemdriver.Ident) {
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
	id := ident("k")

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

		// Readers elsewhere go on and see nothing before the commit (WAL).
		requireGone(t, b, id)
		require.Zero(t, orders(t, b, "order-1"))
		return nil
	})
	require.NoError(t, err)

	got := get(t, b, id)
	require.Equal(t, idemdriver.StatusCompleted, got.Status)
	require.Equal(t, []byte("sealed"), got.Result)
	require.Equal(t, []string{"order-1"}, got.ResourceIDs)
	require.Equal(t, 1, orders(t, b, "order-1"))
}

func TestWithinTxRollsBack(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	id := ident("k")
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
	requireGone(t, b, id)
	require.Zero(t, orders(t, b, "order-1"))
}

func TestWithinTxRollsBackOnPanic(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	id := ident("k")

	require.PanicsWithValue(t, "boom", func() {
		_ = b.store.WithinTx(t.Context(), func(ctx context.Context, tx idemdriver.Store) error {
			_, _, err := tx.Reserve(ctx, reserveParams(id, "owner-1"))
			require.NoError(t, err)
			require.NoError(t, writeOrder(ctx, "order-1"))
			panic("boom")
		})
	})
	requireGone(t, b, id)
	require.Zero(t, orders(t, b, "order-1"))

	// The write lock and the writer semaphore were released.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, created, err := b.store.Reserve(ctx, reserveParams(id, "owner-2"))
	require.NoError(t, err)
	require.True(t, created)
}

// TestWithinTxOutsiderWaits has a plain Reserve of a key that an open
// WithinTx reserved, by the same Store (which waits on its writer
// semaphore) and by another handle on the file (which waits for the write
// lock in SQLite's busy handler): it returns only once the transaction has
// ended, with the committed record, or with one it created after a
// rollback.
func TestWithinTxOutsiderWaits(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		for _, otherHandle := range []bool{false, true} {
			name := map[bool]string{true: "Commit", false: "Rollback"}[commit] +
				map[bool]string{true: "/OtherHandle", false: "/SameStore"}[otherHandle]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				b := setupTx(t)
				outsiderStore := b.store
				if otherHandle {
					db, err := idemsqlite.Open(b.path)
					require.NoError(t, err)
					t.Cleanup(func() { require.NoError(t, db.Close()) })
					outsiderStore = idemsqlite.New(db)
				}
				id := ident("k")
				errApp := errors.New("the application failed")
				type outcome struct {
					rec     idemdriver.Record
					created bool
					err     error
				}
				started := make(chan struct{})
				outsider := make(chan outcome, 1)

				err := b.store.WithinTx(t.Context(), func(ctx context.Context, tx idemdriver.Store) error {
					rec, created, err := tx.Reserve(ctx, reserveParams(id, "insider"))
					require.NoError(t, err)
					require.True(t, created)
					require.NoError(t, writeOrder(ctx, "order-1"))

					go func() {
						close(started)
						rec, created, err := outsiderStore.Reserve(t.Context(), reserveParams(id, "outsider"))
						outsider <- outcome{rec, created, err}
					}()
					<-started
					select {
					case o := <-outsider:
						t.Fatalf("the outsider returned before the transaction ended: %+v", o)
					case <-time.After(200 * time.Millisecond):
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
					require.Equal(t, 1, orders(t, b, "order-1"))
					return
				}
				require.ErrorIs(t, err, errApp)
				require.True(t, o.created, "the outsider creates the record after the rollback")
				require.Equal(t, idemdriver.StatusProcessing, o.rec.Status)
				require.Equal(t, "outsider", o.rec.Token)
				require.Zero(t, orders(t, b, "order-1"))
			})
		}
	}
}

// TestWithinTxStoreWritesWait pins the documented trap: inside fn, a write
// through the Store itself, not through tx, waits for the transaction, and
// so gives up only when its ctx ends.
func TestWithinTxStoreWritesWait(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
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

func TestTxStoreRefusesCallsAfterFn(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		b := setupTx(t)
		id := ident("k")
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
		_, _, err = kept.Reserve(ctx, reserveParams(ident("other"), "late"))
		require.ErrorIs(t, err, sql.ErrTxDone, "reserve")
		require.ErrorContains(t, err, "the transaction of WithinTx has ended")
		_, err = kept.Takeover(ctx, idemdriver.TakeoverParams{Ident: id, Seen: rec.Owner, NewOwner: "late", Lease: time.Minute})
		require.ErrorIs(t, err, sql.ErrTxDone, "takeover")
		err = kept.Complete(ctx, id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted})
		require.ErrorIs(t, err, sql.ErrTxDone, "complete")
		err = kept.Annotate(ctx, id, rec.Owner, idemdriver.Annotation{CorrelationID: "c"})
		require.ErrorIs(t, err, sql.ErrTxDone, "annotate")
		err = kept.Release(ctx, id, rec.Owner)
		require.ErrorIs(t, err, sql.ErrTxDone, "release")
		_, _, err = kept.Get(ctx, id)
		require.ErrorIs(t, err, sql.ErrTxDone, "get")
		_, err = kept.Delete(ctx, id)
		require.ErrorIs(t, err, sql.ErrTxDone, "delete")
		_, err = kept.Sweep(ctx, idemdriver.SweepParams{})
		require.ErrorIs(t, err, sql.ErrTxDone, "sweep")
		require.True(t, strings.HasPrefix(err.Error(), "idemsqlite: sweep: "), err.Error())

		require.ErrorIs(t, writeOrder(keptCtx, "late"), sql.ErrConnDone, "the connection in a kept context is released")

		if commit {
			got := get(t, b, id)
			require.Equal(t, idemdriver.StatusProcessing, got.Status)
			require.Equal(t, rec.Owner, got.Owner)
		} else {
			requireGone(t, b, id)
		}
		require.Zero(t, orders(t, b, "late"))
	}
}

// TestWithinTxClock checks that calls inside a transaction judge time as
// the Store's do: by a params struct's Now, else by the process clock at
// each call.
func TestWithinTxClock(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	err := b.store.WithinTx(t.Context(), func(ctx context.Context, tx idemdriver.Store) error {
		rec, _, err := tx.Reserve(ctx, idemdriver.ReserveParams{
			Ident: ident("fixed"), Owner: "o", Lease: time.Minute, TTL: time.Hour, Now: t0})
		require.NoError(t, err)
		require.Equal(t, t0, rec.ReadAt)
		require.Equal(t, t0, rec.CreatedAt)
		require.Equal(t, t0.Add(time.Minute), rec.LeaseExpiresAt)

		_, err = tx.Takeover(ctx, idemdriver.TakeoverParams{Ident: rec.Ident, Seen: rec.Owner, NewOwner: "o2", Lease: time.Minute, Now: t0.Add(59 * time.Second)})
		require.ErrorIs(t, err, idemdriver.ErrFenced, "lease live by Now")
		taken, err := tx.Takeover(ctx, idemdriver.TakeoverParams{Ident: rec.Ident, Seen: rec.Owner, NewOwner: "o2", Lease: time.Minute, Now: t0.Add(61 * time.Second)})
		require.NoError(t, err)
		require.Equal(t, t0.Add(61*time.Second), taken.ReadAt)

		// Without Now, the process clock: the lease from t0 ended long ago.
		again, err := tx.Takeover(ctx, idemdriver.TakeoverParams{Ident: rec.Ident, Seen: taken.Owner, NewOwner: "o3", Lease: time.Minute})
		require.NoError(t, err)
		require.WithinDuration(t, time.Now(), again.ReadAt, time.Minute)
		require.WithinDuration(t, time.Now(), again.UpdatedAt, time.Minute)
		return nil
	})
	require.NoError(t, err)
}

func TestWithinTxCancelled(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	id := ident("k")
	ctx, cancel := context.WithCancel(t.Context())
	err := b.store.WithinTx(ctx, func(ctx context.Context, tx idemdriver.Store) error {
		_, _, err := tx.Reserve(ctx, reserveParams(id, "o"))
		require.NoError(t, err)
		require.NoError(t, writeOrder(ctx, "order-1"))
		cancel()
		return writeOrder(ctx, "order-2")
	})
	require.ErrorIs(t, err, context.Canceled)
	requireGone(t, b, id)
	require.Zero(t, orders(t, b, "order-1"))

	err = b.store.WithinTx(ctx, func(context.Context, idemdriver.Store) error {
		t.Fatal("fn called with a cancelled context")
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)

	// No connection was left inside a transaction.
	for i := range 10 {
		_, created, err := b.store.Reserve(t.Context(), reserveParams(ident(string(rune('a'+i))), "o"))
		require.NoError(t, err)
		require.True(t, created)
	}
}

// TestWithinTxCommitError checks that a failed COMMIT is returned, wrapped:
// here the application broke the rule and committed through TxFrom.
func TestWithinTxCommitError(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	err := b.store.WithinTx(t.Context(), func(ctx context.Context, tx idemdriver.Store) error {
		ex, _ := idemsqlite.TxFrom(ctx)
		_, err := ex.ExecContext(ctx, "COMMIT")
		return err
	})
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), "idemsqlite: within tx: commit: "), err.Error())
}
