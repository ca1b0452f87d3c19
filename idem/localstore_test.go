package idem

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// deadlineSpy is a Store that records, for its calls, whether the context
// had a deadline and a CallDeadline. Only Reserve and Complete are
// implemented: what Run needs for a first run.
type deadlineSpy struct {
	idemdriver.Store // nil: the other calls are not made
	calls            []spyCall
}

type spyCall struct {
	deadline, callDeadline bool
	callDeadlineAt         time.Time
}

func (s *deadlineSpy) note(ctx context.Context) {
	_, d := ctx.Deadline()
	at, cd := idemdriver.CallDeadline(ctx)
	s.calls = append(s.calls, spyCall{deadline: d, callDeadline: cd, callDeadlineAt: at})
}

func (s *deadlineSpy) Reserve(ctx context.Context, p idemdriver.ReserveParams) (idemdriver.Record, bool, error) {
	s.note(ctx)
	return idemdriver.Record{Ident: p.Ident, Status: idemdriver.StatusProcessing, Owner: idemdriver.Owner{Token: p.Owner, Fence: 1},
		Fingerprint: p.Fingerprint, Attempts: 1, Version: 1}, true, nil
}

func (s *deadlineSpy) Complete(ctx context.Context, _ idemdriver.Ident, _ idemdriver.Owner, _ idemdriver.Completion) error {
	s.note(ctx)
	return nil
}

// localSpy is a deadlineSpy that declares itself a LocalStore.
type localSpy struct{ deadlineSpy }

func (*localSpy) LocalCalls() {}

// TestLocalStoreGetsNoContextDeadline: the engine bounds the
// calls of a LocalStore by a CallDeadline value, not a context deadline
// (which costs modernc.org/sqlite a goroutine per statement), and those of
// any other store by a context deadline, as before.
func TestLocalStoreGetsNoContextDeadline(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, s idemdriver.Store) {
		t.Helper()
		e, err := New(s, Config{DisableSealing: true, StoreTimeout: time.Minute})
		require.NoError(t, err)
		_, err = Run(context.Background(), e, "key-1", "tenant", func(context.Context) (int, error) { return 1, nil }, nil)
		require.NoError(t, err)
	}

	local := &localSpy{}
	before := time.Now()
	run(t, local)
	require.Len(t, local.calls, 2, "reserve and complete")
	for i, c := range local.calls {
		require.False(t, c.deadline, "call %d of a idemdriver.LocalStore has a context deadline", i)
		require.True(t, c.callDeadline, "call %d of a idemdriver.LocalStore has no idemdriver.CallDeadline", i)
		require.False(t, c.callDeadlineAt.Before(before.Add(time.Minute)), "call %d: idemdriver.CallDeadline is the store timeout from the call", i)
	}

	remote := &deadlineSpy{}
	run(t, remote)
	require.Len(t, remote.calls, 2, "reserve and complete")
	for i, c := range remote.calls {
		require.True(t, c.deadline, "call %d of a idemdriver.Store has no context deadline", i)
		require.False(t, c.callDeadline, "call %d of a idemdriver.Store has a idemdriver.CallDeadline", i)
	}
}
