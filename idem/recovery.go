package idem

import (
	"context"
	"time"

	"github.com/unstuckhq/unstuck/idem/internal/decide"
)

// Recovery is the policy for abandoned records of a run, a route or a job
// kind. Build it with [RecoverByEscalating], [RecoverByRerunning] or
// [RecoverByVerifying]; the zero value escalates.
type Recovery struct {
	mode     decide.RecoveryMode
	verifier Verifier
}

// RecoverByEscalating is the default recovery, for effects that must never
// run twice: a successor that finds the key abandoned takes it over, which
// fences the old owner out, and completes it as pending with a LastError
// such as "abandoned: the owner's lease ended at … without an outcome
// (recovery: escalate)". The console lists it for an operator, who
// confirms whether the effect happened; until then every repeat gets
// [ErrPendingReview] (HTTP 409 [CodePendingReview], without Retry-After).
// Guarantee: at most one run per key, at the price of an operator's
// decision after a crash.
func RecoverByEscalating() Recovery { return Recovery{mode: decide.RecoverEscalate} }

// RecoverByRerunning takes an abandoned key over with a higher fence and
// runs the callback again. Use it only for effects that are safe to repeat
// or that the receiver fences by [RunInfo].Fence. Guarantee: at least once
// after a crash; never twice while the first owner's process lives and can
// reach the store (it keeps its lease and records its outcome).
func RecoverByRerunning() Recovery { return Recovery{mode: decide.RecoverRerun} }

// RecoverByVerifying takes an abandoned key over with a higher fence, then
// asks v what happened: happened → the record is completed without a
// result, with v's external reference, as an operator's "confirm happened"
// does (repeats get ErrResultUnavailable); did not happen → the callback
// runs as the new owner; unknown or an error → escalated as by
// [RecoverByEscalating]. A nil v escalates.
func RecoverByVerifying(v Verifier) Recovery {
	if v == nil {
		return RecoverByEscalating()
	}
	return Recovery{mode: decide.RecoverVerify, verifier: v}
}

// Abandoned describes an abandoned record to a [Verifier]. The verifier
// runs as the record's new owner: Fence is the new, higher fence.
type Abandoned struct {
	KeyID         string // safe for logs
	KeyDigest     string // stable across owners: what a downstream key derives from
	Scope         string
	Operation     string
	CorrelationID string
	ExternalRef   string
	ResourceIDs   []string
	Fence         int64
	Attempt       int
	FirstSeenAt   time.Time
	LeaseEndedAt  time.Time // when the previous owner's lease ended
}

// Verdict is a [Verifier]'s answer.
type Verdict int

const (
	// VerdictUnknown: the receiver cannot tell yet; the record is escalated.
	VerdictUnknown Verdict = iota
	// VerdictHappened: the effect exists.
	VerdictHappened
	// VerdictNotHappened: the effect does not exist; it is safe to run.
	VerdictNotHappened
)

// Verification is what a [Verifier] found.
type Verification struct {
	Verdict Verdict
	// ExternalRef is the receiver's reference of the effect found, stored
	// on the record when Verdict is VerdictHappened.
	ExternalRef string
	// Evidence is what the receiver showed, for the operator who reads the
	// decision (the amount, the time, the state it reported). It is shown
	// and audited as untrusted text: keep it short (it is cut at 1,000
	// bytes) and free of secrets and personal data.
	Evidence string
}

// Verifier asks the receiver of an effect whether an abandoned run's effect
// happened, usually by the reference the run attached with [Annotate] or
// by a key derived from KeyDigest. An error counts as VerdictUnknown.
type Verifier interface {
	Verify(ctx context.Context, a Abandoned) (Verification, error)
}

// VerifierFunc adapts a function to a [Verifier].
type VerifierFunc func(ctx context.Context, a Abandoned) (Verification, error)

// Verify calls f.
func (f VerifierFunc) Verify(ctx context.Context, a Abandoned) (Verification, error) {
	return f(ctx, a)
}
