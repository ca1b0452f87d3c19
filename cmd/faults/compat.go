package main

import (
	"context"

	"github.com/unstuckhq/unstuck/idem"
)

// The engine API the harness uses beyond Run and the middleware, in one
// place: today's main has no recovery policies, no ErrOutcomeUnrecorded
// and no Engine.Shutdown.

// policies are the recovery policies this engine offers; "" is its
// default.
var policies = []string{""}

// recoveryOptions returns the engine options of a recovery policy.
func recoveryOptions(policy string) []idem.Option { return nil }

// isUnrecorded reports whether err says that the effect ran and its
// outcome is not stored yet.
func isUnrecorded(err error) bool { return false }

// shutdown waits for the engine's background recordings.
func shutdown(ctx context.Context, e *idem.Engine) error { return nil }
