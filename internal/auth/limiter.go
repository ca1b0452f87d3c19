package auth

import (
	"strings"
	"sync"
	"time"
)

// The sign-in limiters are in memory: each console process limits on its
// own. Both count an attempt when it is reserved, before the password is
// verified, so that parallel attempts cannot all pass one check before any
// of them is counted (count-then-verify, atomically). Both keep only keys
// that failed recently: expired keys are swept whenever the map has doubled
// since the last sweep, so guessing many usernames cannot grow them without
// bound. Both are safe for concurrent use.

// minSweep is the map size below which expired keys are left to be pruned
// when they are next touched.
const minSweep = 1024

// Limiter allows at most max reserved attempts per key (a client address)
// within a sliding window.
type Limiter struct {
	mu      sync.Mutex
	max     int
	window  time.Duration
	now     func() time.Time
	entries map[string][]time.Time
	sweepAt int // sweep expired keys when the map reaches this size
}

// NewLimiter allows max attempts per key within window.
func NewLimiter(max int, window time.Duration) *Limiter {
	return &Limiter{max: max, window: window, now: time.Now, entries: map[string][]time.Time{}, sweepAt: minSweep}
}

// Reserve counts an attempt by key if key has fewer than max attempts in
// the window; otherwise it counts nothing and says how long until key may
// try again. A reserved attempt counts as failed until [Limiter.Release]
// takes it back.
func (l *Limiter) Reserve(key string) (ok bool, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fails := l.prune(key)
	if len(fails) >= l.max {
		return false, fails[0].Add(l.window).Sub(l.now())
	}
	l.entries[key] = append(fails, l.now())
	l.maybeSweep()
	return true, 0
}

// Release takes back one attempt reserved by key: it succeeded, or was
// never made.
func (l *Limiter) Release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if fails := l.prune(key); len(fails) > 0 {
		if len(fails) == 1 {
			delete(l.entries, key)
		} else {
			l.entries[key] = fails[:len(fails)-1]
		}
	}
}

func (l *Limiter) maybeSweep() {
	if len(l.entries) >= l.sweepAt {
		for k := range l.entries {
			l.prune(k)
		}
		l.sweepAt = max(minSweep, 2*len(l.entries))
	}
}

func (l *Limiter) prune(key string) []time.Time {
	cut := l.now().Add(-l.window)
	fails := l.entries[key]
	i := 0
	for i < len(fails) && !fails[i].After(cut) {
		i++
	}
	fails = fails[i:]
	if len(fails) == 0 {
		delete(l.entries, key)
		return nil
	}
	l.entries[key] = fails
	return fails
}

// Backoff throttles a key (an account from one client address) with
// exponential backoff instead of a hard lock: the first free failed
// attempts are free; failure n ≥ free makes the key wait base·2^(n−free),
// at most max. A key forgets its failures forget after the last one (and
// after its wait ended), after a successful sign-in ([Backoff.Reset]), or
// when the account was changed after its first failure (an admin's
// unlock: see [Backoff.Reserve]).
type Backoff struct {
	free   int
	base   time.Duration
	max    time.Duration
	forget time.Duration

	mu      sync.Mutex
	now     func() time.Time
	entries map[string]*backoffEntry
	sweepAt int
}

type backoffEntry struct {
	fails       int
	first, last time.Time // the first and the last counted attempt
	next        time.Time // no attempt before this
}

// NewBackoff returns a Backoff with free attempts, then waits of base,
// 2·base, 4·base … up to max, forgotten after forget without failures.
func NewBackoff(free int, base, max, forget time.Duration) *Backoff {
	return &Backoff{free: free, base: base, max: max, forget: forget, now: time.Now,
		entries: map[string]*backoffEntry{}, sweepAt: minSweep}
}

// delay is the wait after the n-th counted attempt.
func (b *Backoff) delay(n int) time.Duration {
	if n < b.free {
		return 0
	}
	d := b.base
	for i := b.free; i < n && d < b.max; i++ {
		d *= 2
	}
	return min(d, b.max)
}

// expired reports whether e may be forgotten at now.
func (b *Backoff) expired(e *backoffEntry, now time.Time) bool {
	return !now.Before(e.next) && now.Sub(e.last) >= b.forget
}

// Reserve counts an attempt by key unless key must still wait; then it
// counts nothing and says how long. Failures counted at or before
// clearedAt are forgotten first: pass the time the account was last
// changed by an administrator (zero for none). A reserved attempt counts
// as failed until [Backoff.Reset] (success) or [Backoff.Release] (not
// made) takes it back.
func (b *Backoff) Reserve(key string, clearedAt time.Time) (ok bool, wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	e := b.entries[key]
	if e != nil && (b.expired(e, now) || !e.first.After(clearedAt)) {
		delete(b.entries, key)
		e = nil
	}
	if e == nil {
		e = &backoffEntry{first: now}
		b.entries[key] = e
		b.maybeSweep(now)
	}
	if now.Before(e.next) {
		return false, e.next.Sub(now)
	}
	e.fails++
	e.last = now
	if d := b.delay(e.fails); d > 0 {
		e.next = now.Add(d)
	}
	return true, 0
}

// Release takes back one attempt reserved by key that was never made (the
// server was too busy to verify it).
func (b *Backoff) Release(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entries[key]
	if e == nil {
		return
	}
	e.fails--
	if e.fails <= 0 {
		delete(b.entries, key)
		return
	}
	e.next = time.Time{}
	if d := b.delay(e.fails); d > 0 {
		e.next = e.last.Add(d)
	}
}

// Reset forgets key's failures (after a successful sign-in).
func (b *Backoff) Reset(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.entries, key)
}

// ResetPrefix forgets the failures of every key that starts with prefix
// (an account from every address, after an admin's unlock).
func (b *Backoff) ResetPrefix(prefix string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.entries {
		if strings.HasPrefix(k, prefix) {
			delete(b.entries, k)
		}
	}
}

func (b *Backoff) maybeSweep(now time.Time) {
	if len(b.entries) >= b.sweepAt {
		for k, e := range b.entries {
			if b.expired(e, now) {
				delete(b.entries, k)
			}
		}
		b.sweepAt = max(minSweep, 2*len(b.entries))
	}
}
