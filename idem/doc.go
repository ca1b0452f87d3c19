// Package idem runs an operation at most once per idempotency key and
// replays its result to every repeat: [Run] for programmatic calls, the
// HTTP middleware ([NewMiddleware]) for requests, and package idemriver for
// River jobs. Records live in a [Store] (drivers in idem/idempgx and
// idem/idemsqlite); the decision table [Decide] holds all policy.
//
// # When things fail
//
//   - Every store call is bounded by [WithStoreTimeout] (default 5 s).
//   - An outcome that cannot be written after the callback ran (the store
//     restarted, a connection dropped) is reported as
//     [ErrOutcomeUnrecorded] together with the callback's value, and written
//     in the background ([WithRecordingWindow]) while the lease is kept
//     alive, so the key never runs twice while this process lives. Call
//     [Engine.Shutdown] before exiting; [NewCollector] exports the counts.
//   - A key whose owner's lease ended without an outcome (a crash) follows
//     a [Recovery]: [RecoverByEscalating] by default (pending, for an
//     operator), [RecoverByRerunning] or [RecoverByVerifying]. [Engine.Sweep]
//     escalates such records past their retention instead of deleting them.
package idem
