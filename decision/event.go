package decision

import (
	"time"

	"github.com/riverqueue/river"
)

// Kind is the River job kind of a decision event.
const Kind = "unstuck.decision"

// DefaultQueue is the River queue the console inserts decision events on
// unless told another (console serve --decision-events-queue).
const DefaultQueue = "unstuck_decisions"

// Outcomes of a confirmation ([Event.Outcome]).
const (
	Happened    = "happened"
	NotHappened = "not_happened"
)

// The event types: what the operator's decision did.
const (
	// KeyConfirmed: a key's outcome was confirmed by an operator, as
	// happened (completed with the external reference) or as not
	// happened (released, so the client's retry runs it).
	KeyConfirmed = "key.confirmed"
	// KeyForgotten: a key's record was forgotten; the client's retry runs
	// it again.
	KeyForgotten = "key.forgotten"
	// KeyVerified: the application's verifier answered for a key, and the
	// console applied the answer (happened or not happened).
	KeyVerified = "key.verified"
	// OperationRetried: a step of a saga operation was retried.
	OperationRetried = "operation.retried"
	// OperationConfirmed: a step's real outcome was confirmed.
	OperationConfirmed = "operation.confirmed"
	// OperationCompensated: compensation of an operation was started.
	OperationCompensated = "operation.compensated"
	// OperationResolved: a review was closed with a terminal status.
	OperationResolved = "operation.resolved"
	// OperationRedriven: an operation was resumed, re-run or compensated
	// from a step.
	OperationRedriven = "operation.redriven"
)

// Subject kinds.
const (
	SubjectKey       = "key"
	SubjectOperation = "operation"
)

// Event is one applied operator decision, as the console emits it. Its
// JSON encoding (the River job's args) is stable: snake_case names, empty
// optional fields left out, times in RFC 3339 with nanoseconds, UTC.
type Event struct {
	// ID is unique per console database and never reused: "dec_" and the
	// sequence number of the decision's audit entry, so that the event
	// names the entry that records it.
	ID string `json:"id"`
	// Type is what the decision did: one of the Key… and Operation…
	// constants.
	Type string `json:"type"`
	// Subject is what was decided on.
	Subject Subject `json:"subject"`
	// Outcome details Type where it has a choice: "happened" or
	// "not_happened" for key.confirmed, key.verified and
	// operation.confirmed; the terminal status (completed, failed,
	// compensated) for operation.resolved; the mode (resume, rerun,
	// compensate) for operation.redriven; else empty.
	Outcome string `json:"outcome,omitempty"`
	// Actor is the console user who decided (for a bulk item: who
	// requested the bulk).
	Actor string `json:"actor"`
	// Reason is the operator's stated reason, as audited.
	Reason string `json:"reason"`
	// RequestID is the bulk request ("bulk-12") or verification request
	// ("verify-7") the decision was made under, else the HTTP request's ID.
	RequestID string `json:"request_id,omitempty"`
	// Previous is the ID of the previous event on the same subject, ""
	// for the first. Handlers use it to keep each subject's events in
	// order ([WorkerConfig]).
	Previous string `json:"previous,omitempty"`
	// PreviousTime is the Time of the Previous event (zero without one).
	PreviousTime time.Time `json:"previous_time,omitzero"`
	// Time is when the decision committed (its audit entry's time).
	Time time.Time `json:"time"`
}

// Subject is what a decision was made on: a key record or a saga
// operation. Fields not known for the subject are empty.
type Subject struct {
	// Kind is SubjectKey or SubjectOperation.
	Kind string `json:"kind"`
	// ID is the console's ID of the key record, or the operation's ID.
	ID string `json:"id"`
	// Scope is the key's scope (keys only).
	Scope string `json:"scope,omitempty"`
	// Operation is the key's operation, or the saga operation's type.
	Operation string `json:"operation,omitempty"`
	// CorrelationID is the key's or the operation's correlation ID.
	CorrelationID string `json:"correlation_id,omitempty"`
	// ExternalRef is the reference in the external system the decision
	// confirmed or the record carries (a payment's reference), if any.
	ExternalRef string `json:"external_ref,omitempty"`
}

// JobArgs is the River job of one event: the event's fields are the
// job's args.
type JobArgs struct {
	Event
}

// Kind is [Kind].
func (JobArgs) Kind() string { return Kind }

// InsertOpts puts the job on [DefaultQueue]; the console's insert names
// its configured queue, which takes precedence.
func (JobArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: DefaultQueue}
}
