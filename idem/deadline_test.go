package idem

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// remoteStore is a store that is not a LocalStore; its calls are never made.
type remoteStore struct{ idemdriver.Store }

type ctxKey struct{}

// A store call whose caller's context can never be cancelled
// shares a deadline with the calls that begin close to it instead of
// starting a timer of its own; it still ends at most the store timeout
// after it began, with context.DeadlineExceeded, and keeps the caller's
// values. A caller that can cancel still gets a bound of its own that
// its cancellation reaches.
func TestSharedDeadlineBoundsLikeATimeout(t *testing.T) {
	t.Parallel()
	const d = 640 * time.Millisecond
	e, err := New(remoteStore{}, Config{DisableSealing: true, StoreTimeout: d})
	require.NoError(t, err)

	parent := context.WithValue(context.Background(), ctxKey{}, "v")
	// Two calls that begin in the same slice (d/64) share one deadline.
	// On a loaded machine the second may begin in the next slice: the
	// pair is taken again then, a few times; sharing that is broken never
	// shares.
	var (
		a, b  context.Context
		began time.Time
	)
	for range 20 {
		began = time.Now()
		var cancelA, cancelB context.CancelFunc
		a, cancelA = e.bound(parent)
		defer cancelA()
		b, cancelB = e.bound(context.WithoutCancel(parent))
		defer cancelB()
		if a.Done() == b.Done() {
			break
		}
	}
	da, ok := a.Deadline()
	require.True(t, ok)
	require.False(t, da.After(time.Now().Add(d)), "at most the store timeout")
	require.True(t, da.After(began.Add(d-d/64)), "at most a slice sooner: %s", began.Add(d).Sub(da))
	require.Equal(t, a.Done(), b.Done(), "calls that begin together share one deadline")
	require.Equal(t, "v", a.Value(ctxKey{}), "the caller's values")
	require.True(t, idemdriver.DeadlineOnly(a), "nothing but the deadline ends a shared bound")
	require.True(t, idemdriver.DeadlineOnly(context.WithValue(a, ctxKey{}, "w")), "a value does not cancel")
	withCancel, cancelWith := context.WithCancel(a)
	defer cancelWith()
	require.False(t, idemdriver.DeadlineOnly(withCancel), "a derived cancellation of its own")
	require.False(t, idemdriver.DeadlineOnly(parent), "no deadline")

	fired := make(chan struct{})
	stop := context.AfterFunc(a, func() { close(fired) })
	defer stop()
	derived, cancelDerived := context.WithCancel(a)
	defer cancelDerived()
	select {
	case <-a.Done():
	case <-time.After(10 * d):
		t.Fatal("the shared deadline never ended")
	}
	require.GreaterOrEqual(t, time.Since(began), d-d/64)
	require.ErrorIs(t, a.Err(), context.DeadlineExceeded)
	require.ErrorIs(t, context.Cause(a), context.DeadlineExceeded)
	<-fired
	<-derived.Done()
	require.ErrorIs(t, derived.Err(), context.DeadlineExceeded)

	// A later call gets a new deadline, not the one that ended.
	c, cancelC := e.bound(parent)
	defer cancelC()
	require.NoError(t, c.Err())

	// A caller that can cancel: its own bound, which its cancellation ends.
	cctx, cancel := context.WithCancelCause(parent)
	own, cancelOwn := e.bound(cctx)
	defer cancelOwn()
	require.NotEqual(t, c.Done(), own.Done())
	require.False(t, idemdriver.DeadlineOnly(own), "the caller can cancel it")
	cancel(errors.New("client went away"))
	<-own.Done()
	require.ErrorIs(t, own.Err(), context.Canceled)
}

// An outcome write's bound is detached from the caller's
// cancellation (as context.WithoutCancel) and shares a deadline, in the
// run state's own storage: cancelling the caller does not end it, its
// values stay, and the store timeout does.
func TestDetachedBoundOutlivesTheCaller(t *testing.T) {
	t.Parallel()
	const d = 320 * time.Millisecond
	e, err := New(remoteStore{}, Config{DisableSealing: true, StoreTimeout: d})
	require.NoError(t, err)
	caller, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	var buf sharedBound
	ctx := e.boundDetached(caller, &buf)
	require.Same(t, &buf, ctx.(*sharedBound), "no allocation: the given storage")
	cancel()
	require.NoError(t, ctx.Err(), "the caller's cancellation does not reach an outcome write")
	require.Equal(t, "v", ctx.Value(ctxKey{}))
	derived, stop := context.WithCancel(ctx)
	defer stop()
	select {
	case <-derived.Done():
	case <-time.After(10 * d):
		t.Fatal("the store timeout never ended the write")
	}
	require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	require.ErrorIs(t, derived.Err(), context.DeadlineExceeded)
}
