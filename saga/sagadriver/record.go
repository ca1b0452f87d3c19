package sagadriver

import (
	"encoding/json"
	"time"
)

// Operation is the record of one operation (SPEC G2): the system of record
// for its state. River's jobs only carry it forward and are deleted after
// their retention.
type Operation struct {
	// ID is the stable operation ID returned by Start.
	ID string
	// Type is the Definition's type.
	Type string
	// DefinitionVersion is the version of the definition the operation
	// runs: the one it started on, or the one a redrive moved it to.
	DefinitionVersion int
	Status            Status
	// CorrelationID ties the operation to a request or business object.
	CorrelationID string
	Input         json.RawMessage
	// CurrentStep is the step being executed or compensated, or the last.
	CurrentStep string
	// LastError is the error that moved the operation last, with its step.
	LastError string
	// ReviewReason says why the operation is review_required:
	// retries_exhausted, permanent_failure, uncertain_unresolved,
	// compensation_failed, reconciliation_finding or operator.
	ReviewReason string
	// Resolution is the operator's note when resolving a review.
	Resolution string
	// Version increases with every change; operator actions compare it.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
	// FinishedAt is set when the operation reaches a terminal status.
	FinishedAt *time.Time
	// Steps are in definition order.
	Steps []StepRecord
}

// StepRecord is the record of one step of an operation (SPEC G2).
type StepRecord struct {
	Name   string
	Seq    int
	Kind   Kind
	System string
	Status StepStatus
	// Key is the idempotency key of the step: "<op id>/<name>", or, after
	// a redrive re-ran a step whose effect had been compensated,
	// "<op id>/<name>/redrive-<n>" (a new effect needs a new key).
	Key string
	// ExternalID and Result are what the step recorded on completion.
	ExternalID string
	Result     json.RawMessage
	// Attempts counts executions of Do; MaxAttempts bounds them.
	Attempts    int
	MaxAttempts int
	// Verifications counts verifications of the current uncertain outcome.
	Verifications  int
	LastError      string
	LastErrorClass Class
	// Compensable is true when the step has a Compensate.
	Compensable bool
	// Unkeyed is true when the step's Do passes no key to its system, so
	// that a repeat makes a second effect; Verifiable when it has a
	// Verify. A redrive reads them from the record, without the
	// definition.
	Unkeyed, Verifiable bool
	// CompSeq orders compensations (lowest first).
	CompSeq int
	// CompKey is the compensation's own idempotency key.
	CompKey         string
	CompStatus      CompStatus
	CompAttempts    int
	CompMaxAttempts int
	CompError       string
	// Generation increases with every job inserted for the step; a job
	// whose generation is not the step's current one is stale and does
	// nothing.
	Generation int
	StartedAt  *time.Time
	FinishedAt *time.Time
	UpdatedAt  time.Time
}

// Event is one entry of an operation's history, from which the console
// draws its timeline. Events are append-only.
type Event struct {
	ID          int64
	OperationID string
	// Step is empty for events of the operation as a whole.
	Step string
	// Action names what happened: started, step_begun, step_completed,
	// step_retrying, step_uncertain, verified, step_failed,
	// compensation_planned, compensated, compensation_failed, status,
	// late_result, operator_retry, operator_confirm, operator_compensate,
	// operator_resolve, finding.
	Action string
	From   string
	To     string
	// Actor is "worker", "operator:<name>" or "reconciler".
	Actor   string
	Message string
	Attempt int
	At      time.Time
}

// Finding is a difference between our records and an external system,
// found by reconciliation (SPEC G8). It stays open until an operator
// resolves its operation, which accepts it: a later reconciliation that
// finds the same difference (the same Fingerprint) records nothing, and
// only a new difference opens a new finding, which names the accepted one
// in Supersedes and says in Detail what changed.
type Finding struct {
	ID          int64
	OperationID string
	Step        string
	// Kind is orphan_external (the system has an effect we do not
	// record as live), missing_external (we record an effect the system
	// does not have) or unresolved (a step stuck uncertain or in flight).
	Kind       string
	ExternalID string
	Detail     string
	DetectedAt time.Time
	ResolvedAt *time.Time
	// ResolvedBy is the actor who resolved the operation ("operator:ann").
	ResolvedBy string
	// Fingerprint is the kind, the step and the facts compared (our
	// record and the external system's answer), in words: equal
	// fingerprints are the same difference.
	Fingerprint string
	// Supersedes is the ID of the accepted finding of the same kind and
	// step that this one reopens, or 0.
	Supersedes int64
}

// Finding kinds.
const (
	FindingOrphanExternal  = "orphan_external"
	FindingMissingExternal = "missing_external"
	FindingUnresolved      = "unresolved"
)

// Step returns the record of the step called name.
func (o *Operation) Step(name string) (*StepRecord, bool) {
	for i := range o.Steps {
		if o.Steps[i].Name == name {
			return &o.Steps[i], true
		}
	}
	return nil, false
}
