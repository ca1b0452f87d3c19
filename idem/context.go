package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// RunInfo describes the lease a callback runs under.
type RunInfo struct {
	// KeyID is a safe identifier of the key, fit for logs (SPEC M5).
	KeyID string
	// KeyDigest is the record's key digest: stable across retries and
	// takeovers, so a key derived from it is a good idempotency key to pass
	// on to a downstream provider.
	KeyDigest string
	// Fence is the lease's fence number: strictly greater than that of any
	// earlier owner of any key in the store. A receiver that remembers the
	// highest fence it saw per key can refuse a late write from a zombie
	// owner whose lease was taken over.
	Fence int64
	// Attempt counts the owners this record has had, this one included.
	Attempt int
	// FirstSeenAt is when the store first saw the key.
	FirstSeenAt time.Time
}

// runState is an owned record: the store it lives in (the engine's, or a
// transaction's) and the owner's credentials for every later write.
type runState struct {
	engine *Engine
	store  idemdriver.Store
	rec    idemdriver.Record
	id     idemdriver.Ident
	owner  idemdriver.Owner
	info   RunInfo
	// lease is the length of the owner's lease, leaseEnd its end by the
	// process clock (estimated when the record was acquired).
	lease    time.Duration
	leaseEnd time.Time
	// inTx says that store is a transaction's: outcome writes are never
	// recorded in the background, the transaction fails as a whole.
	inTx bool

	mu        sync.Mutex
	uncertain string // set by MarkUncertain: the reason

	// bound is the store-timeout bound of the first outcome write (see
	// Engine.boundDetached), kept here so that it costs no allocation.
	bound sharedBound
}

func (e *Engine) newRunState(s idemdriver.Store, rec idemdriver.Record) *runState {
	lease := rec.LeaseExpiresAt.Sub(rec.ReadAt)
	return &runState{engine: e, store: s, rec: rec, id: rec.Ident, owner: rec.Owner, lease: lease, leaseEnd: time.Now().Add(lease),
		info: RunInfo{KeyID: SafeKeyID(rec.KeyDigest), KeyDigest: rec.KeyDigest, Fence: rec.Fence, Attempt: rec.Attempts, FirstSeenAt: rec.CreatedAt}}
}

func (st *runState) logger() *slog.Logger {
	return st.engine.log.With("key_id", st.info.KeyID, "operation", st.id.Operation, "fence", st.owner.Fence)
}

type runStateKey struct{}

func withRunState(ctx context.Context, st *runState) context.Context {
	return context.WithValue(ctx, runStateKey{}, st)
}

// RunInfoFrom returns the lease a callback of [Run] runs under; ok is false
// outside a callback.
func RunInfoFrom(ctx context.Context) (info RunInfo, ok bool) {
	st, ok := ctx.Value(runStateKey{}).(*runState)
	if !ok {
		return RunInfo{}, false
	}
	return st.info, true
}

// ErrNotInRun is returned by [Annotate] outside a callback of [Run].
var ErrNotInRun = errors.New("idem: not inside an idempotent run")

// Annotation is what a running callback attaches to its record with
// [Annotate] (SPEC M4).
type Annotation struct {
	// CorrelationID ties the record to the caller's trace or request.
	CorrelationID string
	// ExternalRef is the reference sent to an external system (a payment
	// provider's idempotency key or order ID), so an operator can look it up.
	ExternalRef string
	// ResourceIDs are the IDs of what the operation created; appended.
	ResourceIDs []string
}

// Annotate attaches a correlation ID, an external reference and resource
// IDs to the running record at once, so that they are visible to operators
// even if the process dies before completion (SPEC M4). Empty fields leave
// the stored value unchanged; resource IDs are appended. It fails with
// ErrFenced when the lease was taken over.
func Annotate(ctx context.Context, a Annotation) error {
	st, ok := ctx.Value(runStateKey{}).(*runState)
	if !ok {
		return ErrNotInRun
	}
	ctx, cancel := st.engine.bound(ctx)
	defer cancel()
	da := idemdriver.Annotation{CorrelationID: a.CorrelationID, ExternalRef: a.ExternalRef, ResourceIDs: a.ResourceIDs, Now: st.engine.now()}
	if err := st.store.Annotate(ctx, st.id, st.owner, da); err != nil {
		return fmt.Errorf("idem: annotate: %w", err)
	}
	return nil
}

// Uncertain marks a callback's error as an unknown outcome: the effect may
// have happened (a provider timed out after the request was sent). Returned
// from a callback of [Run], it leaves the record pending instead of
// releasing it; repeats get [ErrPendingReview] until the record is
// reconciled, resolved by an operator or forgotten. Attach the reference sent to the
// provider with [Annotate] first. The returned error matches ErrUncertain
// and err.
func Uncertain(err error) error {
	if err == nil {
		err = errors.New("outcome unknown")
	}
	return &uncertainError{err: err}
}

type uncertainError struct{ err error }

func (e *uncertainError) Error() string        { return "outcome uncertain: " + e.err.Error() }
func (e *uncertainError) Unwrap() error        { return e.err }
func (e *uncertainError) Is(target error) bool { return target == ErrUncertain }

// MarkUncertain is for HTTP handlers behind the middleware what [Uncertain]
// is for callbacks of [Run]: the outcome of the request is unknown (a
// provider timed out after it was called). The handler's response is sent
// but not stored; the record becomes pending with reason as its last error,
// and repeats get 409 [CodePendingReview] without Retry-After (or 202 with
// AcceptedWhileInProgress) until the record is reconciled, resolved by an
// operator or forgotten. The reason is for operators: clients never see it. Attach the provider's reference with
// [Annotate] first. Outside a run it returns ErrNotInRun.
func MarkUncertain(ctx context.Context, reason string) error {
	st, ok := ctx.Value(runStateKey{}).(*runState)
	if !ok {
		return ErrNotInRun
	}
	if reason == "" {
		reason = "outcome unknown"
	}
	st.mu.Lock()
	st.uncertain = reason
	st.mu.Unlock()
	return nil
}

func (st *runState) uncertainReason() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.uncertain
}
