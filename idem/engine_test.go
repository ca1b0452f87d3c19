package idem_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/driver/sqlite"
	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemtest"
)

// countingStore passes every call to a real store and counts them.
type countingStore struct {
	idem.Store
	calls atomic.Int32
}

func (c *countingStore) Reserve(ctx context.Context, p idem.ReserveParams) (idem.Record, bool, error) {
	c.calls.Add(1)
	return c.Store.Reserve(ctx, p)
}

func (c *countingStore) Delete(ctx context.Context, id idem.Ident) (bool, error) {
	c.calls.Add(1)
	return c.Store.Delete(ctx, id)
}

func newSQLiteStore(t *testing.T) (idem.Store, func() error) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "idem.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	s := sqlite.New(db)
	require.NoError(t, s.Migrate(context.Background()))
	return s, db.Close
}

func TestNewRefusesMissingSecret(t *testing.T) {
	t.Parallel()
	s, _ := newSQLiteStore(t)
	_, err := idem.New(s)
	require.ErrorContains(t, err, "no secret")
	_, err = idem.New(s, idem.WithSecret([]byte("too short")))
	require.ErrorContains(t, err, "at least 32")
	_, err = idem.New(s, idem.WithSecret(idemtest.Secret), idem.WithoutSealing())
	require.Error(t, err)
	_, err = idem.New(nil, idem.WithoutSealing())
	require.Error(t, err)
	_, err = idem.New(s, idem.WithoutSealing(), idem.WithMaxResultBytes(0))
	require.Error(t, err)
	e, err := idem.New(s, idem.WithoutSealing())
	require.NoError(t, err)
	require.NotNil(t, e)
}

func TestValidationComesBeforeTheStore(t *testing.T) {
	t.Parallel()
	inner, _ := newSQLiteStore(t)
	s := &countingStore{Store: inner}
	e, err := idem.New(s, idem.WithSecret(idemtest.Secret))
	require.NoError(t, err)
	ctx := context.Background()
	fn := func(context.Context) (int, error) { return 1, nil }
	for _, call := range []func() error{
		func() error { _, err := idem.Run(ctx, e, "", "s", fn); return err },
		func() error { _, err := idem.Run(ctx, e, "k", "", fn); return err },
		func() error { _, err := idem.Run(ctx, e, "k", "s", fn, idem.WithTTL(time.Second)); return err },
		func() error { _, err := idem.Run(ctx, e, "k", "s", fn, idem.WithLease(48*time.Hour)); return err },
		func() error { _, err := e.Forget(ctx, "k", ""); return err },
	} {
		require.ErrorIs(t, call(), idem.ErrInvalidKey)
	}
	require.Zero(t, s.calls.Load(), "R2: no store call for invalid input")
}

func TestUnreachableStoreIsAnErrorNeverACompletion(t *testing.T) {
	t.Parallel()
	s, closeDB := newSQLiteStore(t)
	e, err := idem.New(s, idem.WithSecret(idemtest.Secret))
	require.NoError(t, err)
	require.NoError(t, closeDB())
	ran := false
	res, err := idem.Run(context.Background(), e, "k", "s", func(context.Context) (int, error) { ran = true; return 1, nil })
	require.Error(t, err)
	require.False(t, errors.Is(err, idem.ErrInProgress))
	require.False(t, ran, "nothing runs without a reservation")
	require.False(t, res.Replayed)
	_, err = e.Forget(context.Background(), "k", "s")
	require.Error(t, err)
}

// failingCompleteStore lets everything through but the first Complete,
// like a database that drops the connection at commit.
type failingCompleteStore struct {
	idem.Store
	failed atomic.Bool
}

func (f *failingCompleteStore) Complete(ctx context.Context, id idem.Ident, o idem.Owner, c idem.Completion) error {
	if f.failed.CompareAndSwap(false, true) {
		return errors.New("connection reset")
	}
	return f.Store.Complete(ctx, id, o, c)
}

func TestR6CompletionFailureLeavesTheKeyUnavailable(t *testing.T) {
	t.Parallel()
	inner, _ := newSQLiteStore(t)
	s := &failingCompleteStore{Store: inner}
	e, err := idem.New(s, idem.WithSecret(idemtest.Secret))
	require.NoError(t, err)
	ctx := context.Background()
	runs := 0
	fn := func(context.Context) (int, error) { runs++; return 1, nil }
	_, err = idem.Run(ctx, e, "k", "s", fn)
	require.ErrorContains(t, err, "connection reset")
	_, err = idem.Run(ctx, e, "k", "s", fn)
	require.ErrorIs(t, err, idem.ErrResultUnavailable, "the effect ran: never again")
	require.Equal(t, 1, runs)
}

func ExampleRun() {
	db, err := sqlite.Open(filepath.Join(os.TempDir(), "example-run.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	store := sqlite.New(db)
	if err := store.Migrate(context.Background()); err != nil {
		panic(err)
	}
	engine, err := idem.New(store, idem.WithSecret([]byte("an application secret of 32 bytes!")))
	if err != nil {
		panic(err)
	}
	charge := func(ctx context.Context) (string, error) { return "ch_123", nil }
	key := fmt.Sprintf("order-%d", time.Now().UnixNano())
	first, _ := idem.Run(context.Background(), engine, key, "tenant:42", charge)
	again, _ := idem.Run(context.Background(), engine, key, "tenant:42", charge)
	fmt.Println(first.Value, first.Replayed)
	fmt.Println(again.Value, again.Replayed)
	// Output:
	// ch_123 false
	// ch_123 true
}
