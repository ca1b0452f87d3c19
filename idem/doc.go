// Package idem runs an operation at most once per idempotency key and
// replays its result to every repeat.
//
// # What an application calls
//
//   - [New] builds the [Engine] over a store, with the application secret
//     ([Config].Secret, at least [MinSecretBytes] bytes) that seals stored
//     results. One engine per process; call [Engine.Shutdown] before the
//     process exits and [Engine.Sweep] now and then to delete expired
//     records.
//   - [NewMiddleware] makes HTTP handlers idempotent: [Middleware.Required]
//     or [Middleware.Optional] wraps a route, which then runs once per
//     Idempotency-Key and replays its response (see the NewMiddleware
//     example).
//   - [Run] runs a function once per key, for work that is not an HTTP
//     request (see the Run example).
//   - [NewTransport] is the client side: a [net/http.RoundTripper] that
//     adds a key to each POST and PATCH and retries safely.
//   - Package [github.com/unstuckhq/unstuck/idem/idemriver] runs River jobs
//     once per key.
//
// A complete program, on the embedded SQLite store:
//
//	package main
//
//	import (
//		"context"
//		"fmt"
//		"log"
//		"os"
//
//		"github.com/unstuckhq/unstuck/idem"
//		"github.com/unstuckhq/unstuck/idem/idemsqlite"
//	)
//
//	func main() {
//		ctx := context.Background()
//		db, err := idemsqlite.Open("app.db")
//		if err != nil {
//			log.Fatal(err)
//		}
//		defer db.Close()
//		store := idemsqlite.New(db)
//		if err := store.Migrate(ctx); err != nil { // creates or upgrades its tables
//			log.Fatal(err)
//		}
//		engine, err := idem.New(store, idem.Config{Secret: []byte(os.Getenv("APP_SECRET"))}) // 32+ bytes
//		if err != nil {
//			log.Fatal(err)
//		}
//		defer engine.Shutdown(ctx)
//
//		res, err := idem.Run(ctx, engine, "receipt-for-order-42", "tenant:acme",
//			func(ctx context.Context) (string, error) {
//				return "receipt-1", nil // the effect: runs once per key and scope
//			}, nil) // nil: the default TTL, lease and operation ([RunOpts])
//		if err != nil {
//			log.Fatal(err)
//		}
//		fmt.Println(res.Value, res.Replayed) // "receipt-1 false", then "receipt-1 true"
//	}
//
// # Stores
//
// Records live in a store. Each driver's Migrate creates or upgrades its
// tables and is safe to call on every start, from every process:
//
//   - [github.com/unstuckhq/unstuck/idem/idempgx]: PostgreSQL on pgx v5,
//     idempgx.New(pool), then Migrate.
//   - [github.com/unstuckhq/unstuck/idem/idemsqlite]: embedded SQLite (one
//     host, no cgo), idemsqlite.Open(path) and idemsqlite.New(db), then
//     Migrate.
//   - [github.com/unstuckhq/unstuck/idem/idemmysql]: MySQL 8 and MariaDB
//     10.6 or later, idemmysql.Open(dsn) — the DSN must name the database —
//     and idemmysql.New(db), then Migrate.
//   - [github.com/unstuckhq/unstuck/idem/idemredis]: Redis 6.2 or later,
//     or a Redis Cluster: idemredis.New(ctx, client, cfg) checks the server and
//     returns the store and an error; there is nothing to migrate.
//
// A store author implements the contract in package
// [github.com/unstuckhq/unstuck/idem/idemdriver] and proves it with
// package [github.com/unstuckhq/unstuck/idem/idemtest]. The engine holds
// all policy in one decision table; a store only provides atomic
// primitives.
//
// Names follow one rule: With… configures the [Engine] ([New]); Run…
// configures one call of [Run]; Route… one route of the [Middleware];
// Transport… the [Transport]; ContextWith… puts a value into a context for
// the middleware or Run to read.
//
// # When things fail
//
//   - Every store call is bounded by [Config].StoreTimeout (default 5 s).
//   - An outcome that cannot be written after the callback ran (the store
//     restarted, a connection dropped) is reported as
//     [ErrOutcomeUnrecorded] together with the callback's value, and written
//     in the background ([Config].RecordingWindow) while the lease is kept
//     alive, so the key never runs twice while this process lives. Call
//     [Engine.Shutdown] before exiting; [NewCollector] exports the counts.
//   - A key whose owner's lease ended without an outcome (a crash) follows
//     a [Recovery]: [RecoverByEscalating] by default (pending, for an
//     operator), [RecoverByRerunning] or [RecoverByVerifying]. [Engine.Sweep]
//     escalates such records past their retention instead of deleting them.
//
// # What a caller sees
//
// For each state of a key, the answer of the HTTP middleware, of [Run], and
// what a [Transport] does with the answer:
//
//   - first request: the handler (or the callback) runs; its response is
//     stored, unless it is a 5xx (the key is released; see
//     [MiddlewareConfig].StoreServerErrors).
//   - completed or failed: the stored response again, with
//     Idempotent-Replayed: true; Run returns the stored value with
//     Replayed set.
//   - in progress (the first request still runs under its lease): 409
//     [CodeInProgress] with Retry-After, the rest of the lease; Run returns
//     an *[InProgressError]. The Transport waits and retries with the same
//     key. [MiddlewareConfig].WaitInFlight waits for the replay first;
//     AcceptedWhileInProgress answers 202 with Retry-After instead.
//   - waiting for an operator (pending: the first request's outcome is
//     unknown — its process died and [RecoverByEscalating] escalated the
//     key, a verifier could not tell, or the handler called
//     [MarkUncertain]): 409 [CodePendingReview] without Retry-After, with
//     a detail for the end user ("the outcome of your request is being
//     checked"); Run returns a *[PendingReviewError] ([ErrPendingReview],
//     still matching [ErrInProgress]). The Transport does not retry and
//     returns a *[PendingReviewResponseError]. AcceptedWhileInProgress
//     answers 202 with {"status":"pending","code":…} and no Retry-After
//     instead. Nothing changes until an operator or a reconciliation
//     resolves the key ([Engine.Settle]): then a repeat runs (the effect
//     did not happen) or gets [CodeResponseUnavailable] (it did).
//   - ran but not replayable (unavailable, or confirmed without a
//     response): 409 [CodeResponseUnavailable]; Run returns
//     [ErrResultUnavailable]. The Transport does not retry.
//   - same key, other request: 422 [CodeKeyReused]; Run returns
//     [ErrKeyReused]. The Transport does not retry.
//   - store unreachable: 503 [CodeStoreUnavailable] with Retry-After;
//     nothing ran. The Transport retries.
//
// # Tracing
//
// [Config].TracerProvider records OpenTelemetry spans ([SpanRun] around Run,
// [SpanDecide] around each decision, the middleware's included) with safe
// attributes only: the key's safe ID, the record's ID, the operation, the
// decision, the fence and the attempt — never the raw key, the scope, a
// payload or an error's text. The trace ID of the call that creates or
// takes over a record is stored on it (Record.TraceID) for the console to
// link. Without a tracer provider no tracing code runs.
package idem
