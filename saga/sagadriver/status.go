package sagadriver

// Status is the overall status of an operation (SPEC G3).
type Status string

const (
	// StatusPending: recorded, its first job not yet worked.
	StatusPending Status = "pending"
	// StatusRunning: forward steps are being executed.
	StatusRunning Status = "running"
	// StatusCompleted: every step completed. Terminal.
	StatusCompleted Status = "completed"
	// StatusFailed: a step failed permanently before anything needed
	// undoing, or an operator resolved the operation as failed. Terminal.
	StatusFailed Status = "failed"
	// StatusCompensating: compensations are being executed in order.
	StatusCompensating Status = "compensating"
	// StatusCompensated: every planned compensation completed. Terminal.
	StatusCompensated Status = "compensated"
	// StatusReviewRequired: the engine stopped and a human must decide
	// (SPEC G7): retries exhausted after the pivot, uncertainty that
	// verification could not resolve, a failed compensation, or a
	// reconciliation finding. Never shown as done or rolled back.
	StatusReviewRequired Status = "review_required"
)

// Statuses lists every operation status in display order.
var Statuses = []Status{StatusPending, StatusRunning, StatusCompensating, StatusReviewRequired, StatusFailed, StatusCompensated, StatusCompleted}

// Terminal reports whether s is completed, failed or compensated: no job
// runs for such an operation again unless an operator acts on it.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCompensated
}

// StepStatus is the status of one step of an operation (SPEC G3).
type StepStatus string

const (
	// StepPending: not yet started (or to be executed again).
	StepPending StepStatus = "pending"
	// StepRunning: an attempt has begun. A step found running when its job
	// starts means a previous attempt ended without recording its outcome
	// (a crash), so the step is verified before it is executed again.
	StepRunning StepStatus = "running"
	// StepRetrying: the last attempt failed transiently; River retries it.
	StepRetrying StepStatus = "retrying"
	// StepUncertain: the outcome of the last attempt is unknown (a timeout
	// after the request was sent); it is verified, never blindly repeated.
	StepUncertain StepStatus = "uncertain"
	// StepCompleted: the step took effect; Result and ExternalID hold it.
	StepCompleted StepStatus = "completed"
	// StepFailed: the step failed permanently or exhausted its attempts.
	StepFailed StepStatus = "failed"
	// StepSkipped: never reached, because the operation compensated.
	StepSkipped StepStatus = "skipped"
	// StepCompensating: its compensation is planned or running.
	StepCompensating StepStatus = "compensating"
	// StepCompensated: its compensation completed.
	StepCompensated StepStatus = "compensated"
	// StepCompensationFailed: its compensation failed permanently or
	// exhausted its attempts; the operation is review_required.
	StepCompensationFailed StepStatus = "compensation_failed"
)

// CompStatus is the status of a step's compensation; empty while none is
// planned.
type CompStatus string

const (
	CompNone      CompStatus = ""
	CompPending   CompStatus = "pending"
	CompRunning   CompStatus = "running"
	CompRetrying  CompStatus = "retrying"
	CompCompleted CompStatus = "completed"
	CompFailed    CompStatus = "failed"
)

// Kind says what a step is in the saga (microservices.io vocabulary).
type Kind string

const (
	// Compensatable steps come before the pivot; their effect is undone by
	// their Compensate when a later compensatable or pivot step fails.
	Compensatable Kind = "compensatable"
	// Pivot is the go/no-go step: the last one that may fail for a business
	// reason. Its failure compensates the earlier steps; once it completed
	// the operation must run to the end.
	Pivot Kind = "pivot"
	// Retriable steps come after the pivot and are retried until they
	// succeed; a permanent failure sends the operation to review (forward
	// recovery by a human), never to compensation.
	Retriable Kind = "retriable"
)

// Class is how an error of a step is handled (SPEC G5).
type Class string

const (
	// ClassTransient: nothing happened, or repeating with the same key is
	// safe; retried with backoff up to the step's MaxAttempts.
	ClassTransient Class = "transient"
	// ClassPermanent: the step cannot succeed; a compensatable or pivot
	// step compensates the operation, a retriable step sends it to review.
	ClassPermanent Class = "permanent"
	// ClassUncertain: the outcome is unknown (a timeout after the request
	// left); the step is verified before anything else.
	ClassUncertain Class = "uncertain"
)
