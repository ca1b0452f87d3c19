package main

import (
	"context"
	"errors"
	"time"

	"github.com/unstuckhq/unstuck/idem"
)

// The engine API the harness uses beyond Run and the middleware, in one
// place: recovery policies, ErrOutcomeUnrecorded, Engine.Shutdown and the
// engine's counters.

// policies are the recovery policies the experiments that kill the
// application try, by name.
var policies = []string{"escalate", "rerun"}

// recoveryOf returns the engine's default recovery for a policy; ""
// keeps the engine's default (escalate).
func recoveryOf(policy string) idem.Recovery {
	if policy == "rerun" {
		return idem.RecoverByRerunning()
	}
	return idem.RecoverByEscalating()
}

// isUnrecorded reports whether err says that the effect ran and its
// outcome is not stored yet.
func isUnrecorded(err error) bool { return errors.Is(err, idem.ErrOutcomeUnrecorded) }

// shutdown waits, at most a minute, for the engine's background
// recordings.
func shutdown(ctx context.Context, e *idem.Engine) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return e.Shutdown(ctx)
}

// lateCounts returns the engine's counts of outcomes that went to a
// background recording, were recorded late, were given up, and of
// abandoned records escalated.
func lateCounts(e *idem.Engine) (unrecorded, late, givenUp, escalated int) {
	c := e.Counters()
	return int(c.OutcomesUnrecorded), int(c.OutcomesRecordedLate), int(c.OutcomesGivenUp), int(c.AbandonedEscalated)
}
