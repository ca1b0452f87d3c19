package idemtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

type operatorBundle struct {
	store  idemdriver.Store
	engine *idem.Engine
	clock  *Clock
}

func runOperator(t *testing.T, newStore func(t *testing.T) idemdriver.Store) {
	type bundle = operatorBundle
	setup := func(t *testing.T) bundle {
		t.Helper()
		s := newStore(t)
		c := NewClock(start)
		return bundle{store: s, clock: c, engine: newEngine(t, s, idem.Config{Now: c.Now})}
	}
	// pending makes a pending record with an external reference, as a
	// payment whose provider timed out, and returns it as read.
	pending := func(t *testing.T, b bundle, key string) idemdriver.Record {
		t.Helper()
		_, err := idem.Run(ctxT(t), b.engine, key, "tenant:op", func(ctx context.Context) (int, error) {
			require.NoError(t, idem.Annotate(ctx, idem.Annotation{ExternalRef: "prov_" + key}))
			return 0, idem.Uncertain(errors.New("provider timed out"))
		}, nil)
		require.ErrorIs(t, err, idem.ErrUncertain)
		return read(t, b.store, key)
	}

	t.Run("SettleIsACompareAndSwapOnTheVersion", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := pending(t, b, "k1")
		_, _, err := b.store.Settle(ctxT(t), rec.Ident, idemdriver.Settlement{Version: rec.Version - 1, Status: idemdriver.StatusCompleted, Now: b.clock.Now()})
		require.ErrorIs(t, err, idemdriver.ErrStale)
		require.Equal(t, rec.Version, read(t, b.store, "k1").Version, "nothing changed")

		after, ok, err := b.store.Settle(ctxT(t), rec.Ident, idemdriver.Settlement{Version: rec.Version, Status: idemdriver.StatusCompleted,
			ExternalRef: "ch_42", LastError: "confirmed", Now: b.clock.Now()})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, idemdriver.StatusCompleted, after.Status)
		require.Equal(t, "ch_42", after.ExternalRef)
		require.Equal(t, "confirmed", after.LastError)
		require.Empty(t, after.Token, "the owner is cleared")
		require.Nil(t, after.Result)
		require.Greater(t, after.Version, rec.Version)

		_, _, err = b.store.Settle(ctxT(t), rec.Ident, idemdriver.Settlement{Version: rec.Version, Delete: true})
		require.ErrorIs(t, err, idemdriver.ErrStale, "a second decision on the old version is refused")
		_, ok, err = b.store.Settle(ctxT(t), rec.Ident, idemdriver.Settlement{Version: after.Version, Delete: true})
		require.NoError(t, err)
		require.False(t, ok)
		_, found, err := b.store.Get(ctxT(t), rec.Ident)
		require.NoError(t, err)
		require.False(t, found)
		_, _, err = b.store.Settle(ctxT(t), rec.Ident, idemdriver.Settlement{Version: after.Version, Delete: true})
		require.ErrorIs(t, err, idemdriver.ErrStale, "a vanished record is stale")
	})

	t.Run("ConfirmHappenedNeverRunsAgain", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := pending(t, b, "k2")
		after, ok, err := b.engine.Settle(ctxT(t), b.store, rec, idem.OperatorConfirmHappened, "ch_1", "provider shows the charge")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, idemdriver.StatusCompleted, after.Status)
		require.Equal(t, "ch_1", after.ExternalRef)
		ran := false
		_, err = idem.Run(ctxT(t), b.engine, "k2", "tenant:op", func(context.Context) (int, error) { ran = true; return 1, nil }, nil)
		require.ErrorIs(t, err, idem.ErrResultUnavailable, "nothing to replay, and never run again")
		require.False(t, ran)
	})

	t.Run("ConfirmNotHappenedLetsTheNextRequestRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := pending(t, b, "k3")
		_, ok, err := b.engine.Settle(ctxT(t), b.store, rec, idem.OperatorConfirmNotHappened, "", "provider has no charge")
		require.NoError(t, err)
		require.False(t, ok)
		res, err := idem.Run(ctxT(t), b.engine, "k3", "tenant:op", func(context.Context) (int, error) { return 7, nil }, nil)
		require.NoError(t, err)
		require.Equal(t, 7, res.Value)
	})

	t.Run("ForgetIsRefusedUnderALiveLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		entered, release := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			_, err := idem.Run(ctxT(t), b.engine, "k4", "tenant:op", func(context.Context) (int, error) {
				close(entered)
				<-release
				return 1, nil
			}, &idem.RunOpts{Lease: time.Minute})
			done <- err
		}()
		<-entered
		rec := readAt(t, b, "k4")
		_, _, err := b.engine.Settle(ctxT(t), b.store, rec, idem.OperatorForget, "", "")
		require.ErrorIs(t, err, idem.ErrIllegalTransition)
		var te *idem.TransitionError
		require.ErrorAs(t, err, &te)
		require.Equal(t, "processing", te.Status)
		_, _, err = b.engine.Settle(ctxT(t), b.store, rec, idem.OperatorConfirmHappened, "x", "")
		require.ErrorIs(t, err, idem.ErrIllegalTransition)

		// Past its lease the same record is stuck: forget and confirm are legal.
		b.clock.Advance(2 * time.Minute)
		stuck := readAt(t, b, "k4")
		require.NoError(t, idem.CheckOperator(stuck, idem.OperatorConfirmHappened))
		_, _, err = b.engine.Settle(ctxT(t), b.store, stuck, idem.OperatorForget, "", "")
		require.NoError(t, err)
		close(release)
		require.ErrorIs(t, <-done, idemdriver.ErrFenced, "the forgotten owner cannot complete")
	})

	t.Run("ConfirmIsRefusedOnACompletedRecord", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := idem.Run(ctxT(t), b.engine, "k5", "tenant:op", func(context.Context) (int, error) { return 1, nil }, nil)
		require.NoError(t, err)
		rec := read(t, b.store, "k5")
		_, _, err = b.engine.Settle(ctxT(t), b.store, rec, idem.OperatorConfirmNotHappened, "", "")
		require.ErrorIs(t, err, idem.ErrIllegalTransition)
		_, _, err = b.engine.Settle(ctxT(t), b.store, rec, idem.OperatorForget, "", "")
		require.NoError(t, err, "a completed key may be forgotten")
	})
}

func read(t *testing.T, s idemdriver.Store, key string) idemdriver.Record {
	t.Helper()
	rec, ok, err := s.Get(ctxT(t), idemdriver.Ident{Scope: "tenant:op", Operation: idem.DefaultOperation, KeyDigest: idem.Digest("tenant:op", idem.DefaultOperation, key)})
	require.NoError(t, err)
	require.True(t, ok)
	return rec
}

// readAt reads a record as of the test clock: Get has no clock override,
// so the read time is set from the clock the engine uses.
func readAt(t *testing.T, b operatorBundle, key string) idemdriver.Record {
	rec := read(t, b.store, key)
	rec.ReadAt = b.clock.Now()
	return rec
}
