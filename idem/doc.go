// Package idem runs an operation at most once per idempotency key and
// replays its result to every repeat: [Run] for programmatic calls, the
// HTTP middleware ([NewMiddleware]) for requests, and package idemriver for
// River jobs, and [NewTransport] for the client side. Records live in a
// store: idempgx.New (PostgreSQL) or idemsqlite.New (SQLite); a store
// author implements the contract in package idemdriver and proves it with
// package idemtest. The engine holds all policy in one decision table; a
// store only provides atomic primitives.
//
// Names follow one rule: With… configures the [Engine] ([New]); Run…
// configures one call of [Run]; Route… one route of the [Middleware];
// Transport… the [Transport]; ContextWith… puts a value into a context for
// the middleware or Run to read.
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
//
// # Tracing
//
// [WithTracerProvider] records OpenTelemetry spans ([SpanRun] around Run,
// [SpanDecide] around each decision, the middleware's included) with safe
// attributes only: the key's safe ID, the record's ID, the operation, the
// decision, the fence and the attempt — never the raw key, the scope, a
// payload or an error's text. The trace ID of the call that creates or
// takes over a record is stored on it (Record.TraceID) for the console to
// link. Without the option no tracing code runs.
package idem
