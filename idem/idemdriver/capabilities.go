package idemdriver

import (
	"context"
	"time"
)

// This file holds the optional capabilities: what a store may implement
// or use beyond the required [Store], each found by the engine with a type
// assertion or carried in a value a store may ignore. A store without any
// of them is correct, and passes idemtest.Run; the gains below are those
// BENCHMARKS.md records, and where it records none the capability was not
// measured on its own.

// TxStore is a [Store] that can put a record's writes in one database
// transaction with the application's own writes (SPEC H17). It is a
// functional capability, not an optimisation: the HTTP middleware's
// transactional mode needs one and is refused, when the middleware is
// built, over a store that is not. Its conformance suite is
// idemtest.RunTransactional.
type TxStore interface {
	Store
	// WithinTx begins a transaction and calls fn with a context that carries
	// it — the driver documents how the application reaches it, e.g.
	// idempgx.TxFrom(ctx) — and with a Store whose primitives run inside it. If
	// fn returns nil the transaction is committed and the commit's error
	// returned; otherwise it is rolled back and fn's error returned. fn must
	// not keep the transaction after it returns. Concurrent writers of the
	// same record wait for the transaction to end (a unique-index wait on
	// PostgreSQL, the write lock on SQLite).
	WithinTx(ctx context.Context, fn func(ctx context.Context, tx Store) error) error
}

// LocalStore is an optional capability of a [Store] on a database embedded
// in the process (the SQLite driver), whose calls make no network round
// trip. It optimises the store timeout: a context deadline makes
// database/sql and modernc.org/sqlite start a goroutine per statement to
// watch the context, which costs such a store more than its statements. So
// the engine sets no deadline on the calls it makes to a LocalStore; it
// passes the end of the store timeout (idem.Config.StoreTimeout) as a value
// instead, which [CallDeadline] reads. The caller's own deadline and
// cancellation still reach the store through the context, as for any
// store. Gain: not measured separately.
//
// The contract of a LocalStore: a call that waits for anything in the
// process (a queue of its own writers) gives up at the CallDeadline with an
// error matching [context.DeadlineExceeded]; every other wait in a call is
// bounded by the store itself (SQLite's busy timeout on another handle's
// write lock), as its documentation states.
type LocalStore interface {
	Store
	// LocalCalls marks the contract above; it does nothing.
	LocalCalls()
}

// callDeadlineKey is the context key of [CallDeadline].
type callDeadlineKey struct{}

// CallDeadline returns when the engine wants the current call of a
// [LocalStore] to end; ok is false when ctx carries none (a call not made
// by the engine, or to a store that is not local, whose context has a
// deadline instead).
func CallDeadline(ctx context.Context) (deadline time.Time, ok bool) {
	deadline, ok = ctx.Value(callDeadlineKey{}).(time.Time)
	return deadline, ok
}

// ContextWithCallDeadline returns a copy of ctx that carries deadline for
// [CallDeadline]. The engine calls it for every call it makes to a
// [LocalStore]; a store's own tests may too.
func ContextWithCallDeadline(ctx context.Context, deadline time.Time) context.Context {
	return context.WithValue(ctx, callDeadlineKey{}, deadline)
}

// DeadlineOnlyKey is the context key under which a context whose only
// cancellation is its deadline answers its own Done channel (see
// [DeadlineOnly]). The engine's bound of a call whose caller can never
// cancel it (an outcome write, a context.Background caller) answers it;
// like net/http's context keys, it is a pointer to an unexported type.
var DeadlineOnlyKey any = &deadlineOnlyKey{}

type deadlineOnlyKey struct{}

// DeadlineOnly reports whether nothing but its deadline ends ctx: ctx
// answers [DeadlineOnlyKey] with the channel its Done returns (a context
// derived with a cancellation of its own has another Done and is not).
//
// It is an optional capability, a hint a store may ignore: such a store
// may end the call at ctx's deadline by other means than watching ctx —
// idempgx sets the deadline on the connection's socket, which is what pgx
// does itself when a watched context ends, without registering a watch per
// statement — as long as the call still fails with an error matching
// [context.DeadlineExceeded] at that deadline. It optimises the CPU of
// each statement of an outcome write. Gain: not measured separately.
func DeadlineOnly(ctx context.Context) bool {
	done := ctx.Done()
	if done == nil {
		return false
	}
	ch, ok := ctx.Value(DeadlineOnlyKey).(<-chan struct{})
	return ok && ch == done
}

// LeanFields names the fields of a [Record] that [Store.Reserve] fills for
// an existing record when [ReserveParams.Lean] is set: those the engine's
// decision, a takeover and a replay read.
//
// Lean is an optional capability, a params field a store may ignore and
// return whole records: with it, a store may return, for a record that
// exists (created = false), only these fields, every other one zero; a
// record it creates is always whole. The engine sets it on every Reserve,
// so a repeat reads a narrow row. It optimises a repeat's read. Gain: not
// measured separately.
const LeanFields = "ID, Ident, Fingerprint, Status, Result, Owner (Token, Fence), LeaseExpiresAt, CreatedAt, ExpiresAt, ReadAt"
