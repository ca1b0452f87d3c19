package idem

import (
	"errors"
	"fmt"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// Conditions a caller of [Run] or the HTTP middleware can match with errors.Is.
var (
	// ErrInvalidKey: a key, scope, operation or fingerprint is malformed or
	// out of range. The error is a *[ValidationError] naming the field; no
	// store was touched.
	ErrInvalidKey = errors.New("idem: invalid idempotency key")
	// ErrInvalidOption: a TTL or lease (of a run, a route, a job kind) is out
	// of range. The error is a *[ValidationError] naming the field; no store
	// was touched.
	ErrInvalidOption = errors.New("idem: invalid option")
	// ErrKeyReused: the key was first used with another fingerprint
	// (SPEC R3, H8). Nothing ran, nothing changed.
	ErrKeyReused = errors.New("idem: idempotency key reused with a different request")
	// ErrInProgress: another owner holds the key, or its outcome is pending.
	// For a key held by another owner the error is an *[InProgressError]
	// carrying when to retry (SPEC H9); for a pending key it is a
	// *[PendingReviewError], which matches ErrPendingReview too.
	ErrInProgress = errors.New("idem: request with this idempotency key is in progress")
	// ErrPendingReview: the key's outcome is unknown and waits for an
	// operator or a reconciliation (SPEC M4, K21): its owner was lost and
	// the recovery escalated it, a verifier could not tell, or the run
	// ended [Uncertain]. The engine never resolves such a key by itself, so
	// repeating the call gets the same answer until someone does. [Run]
	// returns a *[PendingReviewError]; a [Transport] returns a
	// *[PendingReviewResponseError] when a server answers with
	// [CodePendingReview].
	ErrPendingReview = errors.New("idem: the outcome of this idempotency key is pending review")
	// ErrResultUnavailable: the operation ran but its result cannot be
	// replayed (not storable, sealed under an unknown secret, or corrupt).
	// It is never run again automatically (SPEC R5, H13).
	ErrResultUnavailable = errors.New("idem: result for this idempotency key is unavailable")
	// ErrResultNotStorable: the callback ran, but its result could not be
	// stored (NaN, Inf, a channel, over the size limit). The key is completed
	// unavailable; later runs get ErrResultUnavailable (SPEC R5).
	ErrResultNotStorable = errors.New("idem: result cannot be stored")
	// ErrUncertain: the callback ended the run as uncertain with [Uncertain];
	// the record is pending until reconciled (SPEC M4).
	ErrUncertain = errors.New("idem: outcome uncertain, record pending")
	// ErrOutcomeUnrecorded: the callback ran (it succeeded, failed, was
	// uncertain, or returned an unstorable value) but its outcome could not
	// be written to the store yet. The effect is real: [Run] returns the
	// callback's value with it. The engine keeps trying to write the
	// outcome in the background and keeps the lease alive meanwhile, so a
	// repeat gets ErrInProgress, then the stored outcome; see
	// [Engine.Shutdown] and [Engine.Counters]. The error also wraps the
	// store's error.
	ErrOutcomeUnrecorded = errors.New("idem: the callback ran but its outcome is not recorded yet")
)

// ValidationError names the argument that made a call invalid. With
// errors.Is it matches [ErrInvalidOption] when Field is "ttl" or "lease"
// (an out-of-range TTL or Lease of [RunOpts] or [RouteOpts]), and
// [ErrInvalidKey] for every other field: a malformed key, scope, operation
// or fingerprint, a bad [RouteOpts].Name, or an Idempotency-Key header
// [ParseKeyHeader] refuses.
//
// A store that refuses an argument its database cannot hold returns an
// *[idemdriver.FieldError]; the engine reports it as a ValidationError
// with the same Field and Reason, which unwraps to the store's error
// (errors.As still finds the driver's own error in it).
type ValidationError struct {
	// Field is "key", "scope", "operation", "fingerprint", "route",
	// "Idempotency-Key", "ttl" or "lease".
	Field  string
	Reason string
	cause  error // the store's error, when a store refused the argument
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("idem: invalid %s: %s", e.Field, e.Reason)
}

// Is reports a match with ErrInvalidOption for a TTL or lease, and with
// ErrInvalidKey for every other field.
func (e *ValidationError) Is(target error) bool {
	if e.Field == "ttl" || e.Field == "lease" {
		return target == ErrInvalidOption
	}
	return target == ErrInvalidKey
}

// Unwrap returns the store's error when a store refused the argument, nil
// otherwise.
func (e *ValidationError) Unwrap() error { return e.cause }

// storeError returns err, from a store call, as a *ValidationError when
// the store refused an argument with an *idemdriver.FieldError matching
// idemdriver.ErrInvalidArgument, so that applications match the same
// error whatever the store; any other error is returned as it is.
func storeError(err error) error {
	var fe *idemdriver.FieldError
	if err == nil || !errors.Is(err, idemdriver.ErrInvalidArgument) || !errors.As(err, &fe) {
		return err
	}
	return &ValidationError{Field: fe.Field, Reason: fe.Reason, cause: err}
}

// InProgressError says that the key is held by another owner, or that its
// outcome is pending. It matches ErrInProgress with errors.Is. [Run]
// returns it itself for a key held by another owner (Status processing);
// for a pending key it returns a *[PendingReviewError], in which errors.As
// finds an InProgressError with Status pending.
type InProgressError struct {
	// RetryAfter is when a repeat may succeed: the rest of the live lease, or
	// the engine's pending retry interval. Never below one second.
	RetryAfter time.Duration
	// Status is the record's status: processing or pending.
	Status idemdriver.Status
}

func (e *InProgressError) Error() string {
	return fmt.Sprintf("idem: request with this idempotency key is %s, retry after %s", e.Status, e.RetryAfter)
}

// Is reports a match with ErrInProgress.
func (e *InProgressError) Is(target error) bool { return target == ErrInProgress }

// PendingReviewError says that the key's outcome is pending review: unknown,
// and waiting for an operator or a reconciliation (SPEC M4, K21). [Run]
// returns it for a pending key, whether a recovery has just escalated it or
// an earlier run left it so. It matches ErrPendingReview with errors.Is.
//
// It also still matches ErrInProgress, and errors.As finds an
// *[InProgressError] (Status pending, the same RetryAfter) in it, as
// before it existed: the callers of Run are programs, and those that treat
// ErrInProgress as "not finished, come back later" — a job queue that
// snoozes the job (package idemriver), a worker loop — must keep waiting
// and keep never running the key twice; they poll at RetryAfter, the
// engine's pending interval, not at a lease's pace, so they do not spin.
// Match ErrPendingReview before ErrInProgress to tell a person that the
// outcome is being checked rather than still running.
type PendingReviewError struct {
	// RetryAfter is the engine's pending retry interval
	// ([Config].PendingRetryAfter): a pace for programs that poll, not a time
	// by which the review ends.
	RetryAfter time.Duration
}

func (e *PendingReviewError) Error() string {
	return "idem: the outcome of this idempotency key is unknown and pending review by an operator or a reconciliation"
}

// Is reports a match with ErrPendingReview.
func (e *PendingReviewError) Is(target error) bool { return target == ErrPendingReview }

// Unwrap returns the *[InProgressError] this error was before K21, so that
// ErrInProgress and *InProgressError still match.
func (e *PendingReviewError) Unwrap() error {
	return &InProgressError{RetryAfter: e.RetryAfter, Status: idemdriver.StatusPending}
}
