package saga

import "github.com/unstuckhq/unstuck/saga/sagadriver"

// The records and statuses of package sagadriver that the application API
// returns, under their names in this package. They are type aliases: a
// saga.Operation is a sagadriver.Operation.
type (
	// Operation is the record of one operation (SPEC G2).
	Operation = sagadriver.Operation
	// StepRecord is the record of one step of an operation.
	StepRecord = sagadriver.StepRecord
	// Event is one entry of an operation's history.
	Event = sagadriver.Event
	// Finding is a difference found by reconciliation (SPEC G8).
	Finding = sagadriver.Finding
	// Status is the overall status of an operation (SPEC G3).
	Status = sagadriver.Status
	// StepStatus is the status of one step of an operation.
	StepStatus = sagadriver.StepStatus
	// CompStatus is the status of a step's compensation.
	CompStatus = sagadriver.CompStatus
	// Kind says what a step is in the saga.
	Kind = sagadriver.Kind
	// Class is how an error of a step is handled (SPEC G5).
	Class = sagadriver.Class
)

// Operation statuses; see [sagadriver.Status].
const (
	StatusPending        = sagadriver.StatusPending
	StatusRunning        = sagadriver.StatusRunning
	StatusCompleted      = sagadriver.StatusCompleted
	StatusFailed         = sagadriver.StatusFailed
	StatusCompensating   = sagadriver.StatusCompensating
	StatusCompensated    = sagadriver.StatusCompensated
	StatusReviewRequired = sagadriver.StatusReviewRequired
)

// Statuses lists every operation status in display order.
var Statuses = sagadriver.Statuses

// Step statuses; see [sagadriver.StepStatus].
const (
	StepPending            = sagadriver.StepPending
	StepRunning            = sagadriver.StepRunning
	StepRetrying           = sagadriver.StepRetrying
	StepUncertain          = sagadriver.StepUncertain
	StepCompleted          = sagadriver.StepCompleted
	StepFailed             = sagadriver.StepFailed
	StepSkipped            = sagadriver.StepSkipped
	StepCompensating       = sagadriver.StepCompensating
	StepCompensated        = sagadriver.StepCompensated
	StepCompensationFailed = sagadriver.StepCompensationFailed
)

// Compensation statuses; see [sagadriver.CompStatus].
const (
	CompNone      = sagadriver.CompNone
	CompPending   = sagadriver.CompPending
	CompRunning   = sagadriver.CompRunning
	CompRetrying  = sagadriver.CompRetrying
	CompCompleted = sagadriver.CompCompleted
	CompFailed    = sagadriver.CompFailed
)

// Step kinds; see [sagadriver.Kind].
const (
	Compensatable = sagadriver.Compensatable
	Pivot         = sagadriver.Pivot
	Retriable     = sagadriver.Retriable
)

// Error classes; see [sagadriver.Class].
const (
	ClassTransient = sagadriver.ClassTransient
	ClassPermanent = sagadriver.ClassPermanent
	ClassUncertain = sagadriver.ClassUncertain
)

// Finding kinds; see [sagadriver.Finding].
const (
	FindingOrphanExternal  = sagadriver.FindingOrphanExternal
	FindingMissingExternal = sagadriver.FindingMissingExternal
	FindingUnresolved      = sagadriver.FindingUnresolved
)

// Errors of the runner and its driver, matched with errors.Is.
var (
	// ErrNotFound is returned for an operation (or step) that does not
	// exist.
	ErrNotFound = sagadriver.ErrNotFound
	// ErrStale is returned by an operator action whose expected version is
	// not the operation's current one: it changed since the operator saw
	// it, and nothing was applied.
	ErrStale = sagadriver.ErrStale
	// ErrExists is returned by Start for an operation ID that is taken.
	ErrExists = sagadriver.ErrExists
)

// clone returns a deep enough copy of o for the state machine to change.
func clone(o Operation) Operation {
	o.Steps = append([]StepRecord(nil), o.Steps...)
	return o
}
