package auth

import (
	"context"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Gate caps how many password hashes run at once: each Argon2id
// verification takes 19 MiB and a core, so a flood of sign-ins must queue
// rather than exhaust memory. Safe for concurrent use.
type Gate struct {
	slots chan struct{}
	wait  time.Duration
}

// NewGate lets n hashes run at once (at least 1); a caller waits at most
// wait for a slot.
func NewGate(n int, wait time.Duration) *Gate {
	return &Gate{slots: make(chan struct{}, max(1, n)), wait: wait}
}

// Enter takes a slot, waiting at most the gate's wait (or until ctx ends).
// It returns the function that gives the slot back, or ok false when no
// slot came free in time.
func (g *Gate) Enter(ctx context.Context) (leave func(), ok bool) {
	select {
	case g.slots <- struct{}{}:
		return g.leave, true
	default:
	}
	t := time.NewTimer(g.wait)
	defer t.Stop()
	select {
	case g.slots <- struct{}{}:
		return g.leave, true
	case <-t.C:
		return nil, false
	case <-ctx.Done():
		return nil, false
	}
}

func (g *Gate) leave() { <-g.slots }

// MaxLogName is the most bytes of a client-supplied name that [LogName]
// keeps.
const MaxLogName = 64

// LogName returns s fit for a log line: invalid UTF-8 and control
// characters replaced by '?', cut to MaxLogName bytes with "…" when
// longer. It bounds what an attacker's username can write to the logs.
func LogName(s string) string {
	cut := len(s) > MaxLogName
	if cut {
		s = s[:MaxLogName]
	}
	var b strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && size <= 1 && !(cut && !utf8.FullRuneInString(s)) {
			b.WriteByte('?')
		} else if r == utf8.RuneError && size <= 1 {
			break // a rune cut by the length bound
		} else if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			b.WriteByte('?')
		} else {
			b.WriteRune(r)
		}
		s = s[size:]
	}
	if cut {
		b.WriteString("…")
	}
	return b.String()
}
