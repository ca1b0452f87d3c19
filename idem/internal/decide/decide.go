// Package decide is the idempotency engine's one decision table (SPEC
// IDEM-S1): a pure function from the stored record and the request to what
// happens. It is internal so that applications see only its effects.
package decide

import (
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// Action is what the engine does with a request, as decided by [Decide].
type Action int

const (
	// ActionReserve: no record exists; reserve one and run.
	ActionReserve Action = iota + 1
	// ActionTakeOver: the record is processing but its lease has ended and
	// the recovery is idem.RecoverByRerunning; take it over with a
	// compare-and-swap (new owner, higher fence), keeping the first-seen
	// time, and run again.
	ActionTakeOver
	// ActionRestart: the record's retention has ended; take it over as a
	// fresh record (a new intent under an old key) and run.
	ActionRestart
	// ActionWait: another owner holds a live lease; answer in-progress
	// with RetryAfter, the rest of the lease (H9).
	ActionWait
	// ActionRejectReused: the key came with another fingerprint; nothing runs.
	ActionRejectReused
	// ActionReplay: the stored result is replayed.
	ActionReplay
	// ActionUnavailable: the operation ran but its result cannot be
	// replayed; it is never run again automatically.
	ActionUnavailable
	// ActionEscalate: the record is processing, its lease has ended without
	// an outcome and the recovery is idem.RecoverByEscalating; take it over
	// (fencing the old owner out), then complete it pending with an
	// idemdriver.AbandonedReason, so that an operator decides; the answer
	// is ActionAwaitReview. Nothing runs.
	ActionEscalate
	// ActionVerify: as ActionEscalate, but the recovery is
	// idem.RecoverByVerifying: after the takeover the verifier says whether the
	// effect happened (complete it without a result), did not (run as the
	// new owner) or cannot tell (escalate).
	ActionVerify
	// ActionAwaitReview: the outcome is pending (unknown): only
	// reconciliation or an operator ends it, and nothing the caller can do
	// changes the answer meanwhile (M4, K21). Nothing runs; answer pending
	// review, distinct from in-progress. RetryAfter is the policy's
	// PendingRetryAfter, a pace for programs that poll.
	ActionAwaitReview
)

var actionNames = map[Action]string{
	ActionReserve:      "reserve",
	ActionTakeOver:     "take_over",
	ActionRestart:      "restart",
	ActionWait:         "wait",
	ActionRejectReused: "reject_reused",
	ActionReplay:       "replay",
	ActionUnavailable:  "unavailable",
	ActionEscalate:     "escalate",
	ActionVerify:       "verify",
	ActionAwaitReview:  "await_review",
}

func (a Action) String() string {
	if s, ok := actionNames[a]; ok {
		return s
	}
	return "unknown"
}

// Request is what a caller brings to a key.
type Request struct {
	Fingerprint string
	// KeyHash is the raw key's look-up hash (idem.KeyHash), stored with a
	// new record; it plays no part in the decision.
	KeyHash string
	// Recovery is what this caller may do with a record abandoned by its
	// owner (processing, lease ended). The zero value escalates.
	Recovery RecoveryMode
}

// Policy holds the engine settings the decision depends on.
type Policy struct {
	// PendingRetryAfter is the polling pace given with a pending record
	// (ActionAwaitReview), which holds no lease.
	PendingRetryAfter time.Duration
}

// Outcome is the result of [Decide].
type Outcome struct {
	Action Action
	// RetryAfter is set for ActionWait and ActionAwaitReview: at least one
	// second.
	RetryAfter time.Duration
}

// Decide is the one decision table of the engine (SPEC IDEM-S1): a pure
// function from the stored record (nil when none exists) and the request to
// what happens. Stores hold no policy; every outcome of Run and of the HTTP
// middleware comes from here. The rules, in order:
//
//   - no record → reserve (R1)
//   - retention ended, no live lease, not pending, and either finished or
//     recovered by rerunning → restart as new (M6)
//   - other fingerprint → reject as reused, whatever the status (R3, H8)
//   - processing under a live lease → wait for the rest of the lease (H9)
//   - processing, lease ended (abandoned) → by the request's recovery:
//     escalate (the default), verify, or take over with a higher fence and
//     run again (S1)
//   - pending → await review; only reconciliation or an operator ends it
//     (M4, K21)
//   - completed or failed → replay (R1, H7)
//   - unavailable, or any status not known → unavailable, fail closed (R5, H13)
func Decide(rec *idemdriver.Record, req Request, p Policy) Outcome {
	if rec == nil {
		return Outcome{Action: ActionReserve}
	}
	if rec.Expired() && rec.Status.Valid() && (rec.Status != idemdriver.StatusProcessing || req.Recovery == RecoverRerun) {
		return Outcome{Action: ActionRestart}
	}
	if rec.Fingerprint != req.Fingerprint {
		return Outcome{Action: ActionRejectReused}
	}
	switch rec.Status {
	case idemdriver.StatusProcessing:
		if rec.LeaseLive() {
			return Outcome{Action: ActionWait, RetryAfter: AtLeastASecond(rec.LeaseExpiresAt.Sub(rec.ReadAt))}
		}
		switch req.Recovery {
		case RecoverRerun:
			return Outcome{Action: ActionTakeOver}
		case RecoverVerify:
			return Outcome{Action: ActionVerify}
		default:
			return Outcome{Action: ActionEscalate}
		}
	case idemdriver.StatusPending:
		return Outcome{Action: ActionAwaitReview, RetryAfter: AtLeastASecond(p.PendingRetryAfter)}
	case idemdriver.StatusCompleted, idemdriver.StatusFailed:
		return Outcome{Action: ActionReplay}
	default:
		return Outcome{Action: ActionUnavailable}
	}
}

// AtLeastASecond rounds d up to whole seconds, never below one, as a
// Retry-After header needs.
func AtLeastASecond(d time.Duration) time.Duration {
	if d <= time.Second {
		return time.Second
	}
	if r := d % time.Second; r != 0 {
		d += time.Second - r
	}
	return d
}

// RecoveryMode is what a successor does with an abandoned record: one that
// is processing under a lease that ended without an outcome, because its
// owner crashed, stalled past its lease, or could not reach the store. The
// zero value escalates.
type RecoveryMode int

const (
	// RecoverEscalate: fence the old owner out and make the record pending
	// for an operator; repeats are told that it awaits review. Nothing
	// runs again.
	RecoverEscalate RecoveryMode = iota
	// RecoverRerun: take the record over with a higher fence and run again.
	RecoverRerun
	// RecoverVerify: take the record over, then ask a idem.Verifier.
	RecoverVerify
)

func (m RecoveryMode) String() string {
	switch m {
	case RecoverRerun:
		return "rerun"
	case RecoverVerify:
		return "verify"
	default:
		return "escalate"
	}
}
