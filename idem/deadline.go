package idem

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// sharedDeadlines bounds store calls whose caller's context can never be
// cancelled (context.Background, context.WithoutCancel: every outcome
// write, and every call of a caller without a deadline) without a timer per
// call: calls that begin within one slice of the store timeout (1/64 of
// it) share one context with a deadline, made by the first of them. The
// shared deadline is never later than the store timeout after a call
// began, and at most one slice earlier. A caller whose context can be
// cancelled gets a context.WithTimeout of its own, as before.
type sharedDeadlines struct {
	cur atomic.Pointer[deadlineSlot]
	mu  sync.Mutex
}

// deadlineSlot is one shared deadline: a context of its own that ends at
// the deadline.
type deadlineSlot struct {
	ctx    context.Context
	at     time.Time
	cancel context.CancelFunc // never called: the context ends at its deadline
}

// slot returns a deadline slot that ends at most timeout from now and no
// sooner than timeout − timeout/64 from now.
func (s *sharedDeadlines) slot(timeout time.Duration) *deadlineSlot {
	latest := time.Now().Add(timeout)
	earliest := latest.Add(-timeout / 64)
	if d := s.cur.Load(); d != nil && !d.at.After(latest) && d.at.After(earliest) {
		return d
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.cur.Load(); d != nil && !d.at.After(latest) && d.at.After(earliest) {
		return d
	}
	ctx, cancel := context.WithDeadline(context.Background(), latest)
	d := &deadlineSlot{ctx: ctx, at: latest, cancel: cancel}
	s.cur.Store(d)
	return d
}

// sharedBound is a caller's context bounded by a shared deadline and
// detached from the caller's cancellation, if any: the caller's values,
// the slot's deadline, Done and Err. Its Value lets the context package
// see the slot's cancellation (context.AfterFunc and WithCancel on it
// register with the slot instead of starting a goroutine, and
// context.Cause gives the slot's cause), and tells a store that nothing
// but the deadline ends it (idemdriver.DeadlineOnly).
type sharedBound struct {
	parent context.Context
	slot   *deadlineSlot
}

func (c *sharedBound) Deadline() (time.Time, bool) { return c.slot.at, true }
func (c *sharedBound) Done() <-chan struct{}       { return c.slot.ctx.Done() }
func (c *sharedBound) Err() error                  { return c.slot.ctx.Err() }
func (c *sharedBound) Value(key any) any {
	if key == idemdriver.DeadlineOnlyKey {
		return c.slot.ctx.Done() // nothing but the deadline ends it
	}
	// The slot's context answers only the context package's own key, with
	// its cancellation; that answer must win over a parent's (a detached
	// parent may be cancellable), every other key is the parent's.
	if v := c.slot.ctx.Value(key); v != nil {
		return v
	}
	return c.parent.Value(key)
}
func (c *sharedBound) String() string { return "idem.sharedBound" }
