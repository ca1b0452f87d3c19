package auth

import (
	"sync"
	"time"
)

// Limiter counts failed sign-ins per key (an account or an address) in a
// sliding window and refuses a key that reached its limit. It is in memory:
// each console process limits on its own. It keeps only keys that failed
// within the window: expired keys are swept whenever the map has doubled
// since the last sweep, so guessing many usernames cannot grow it beyond
// the failures of one window. Safe for concurrent use.
type Limiter struct {
	mu      sync.Mutex
	max     int
	window  time.Duration
	now     func() time.Time
	entries map[string][]time.Time
	sweepAt int // sweep expired keys when the map reaches this size
}

// minSweep is the map size below which expired keys are left to be pruned
// when they are next touched.
const minSweep = 1024

// NewLimiter allows max failures per key within window.
func NewLimiter(max int, window time.Duration) *Limiter {
	return &Limiter{max: max, window: window, now: time.Now, entries: map[string][]time.Time{}, sweepAt: minSweep}
}

// Allowed reports whether key may try again, and if not, how long until it
// may.
func (l *Limiter) Allowed(key string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fails := l.prune(key)
	if len(fails) < l.max {
		return true, 0
	}
	return false, fails[0].Add(l.window).Sub(l.now())
}

// Fail records a failed attempt by key.
func (l *Limiter) Fail(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries[key] = append(l.prune(key), l.now())
	if len(l.entries) >= l.sweepAt {
		for k := range l.entries {
			l.prune(k)
		}
		l.sweepAt = max(minSweep, 2*len(l.entries))
	}
}

// Reset forgets key's failures (after a successful sign-in).
func (l *Limiter) Reset(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.entries, key)
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
