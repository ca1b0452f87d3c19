package saga

import "github.com/unstuckhq/unstuck/saga/sagadriver"

// The records an application reads (operations, steps, events, findings)
// and their statuses, kinds and classes live in package sagadriver and are
// named from there, as River names rivertype.JobRow: the runner's API and
// the drivers use the same types, without aliases (docs/conventions.md).

// Errors of the runner and its driver, matched with errors.Is. They are
// sagadriver's sentinels under the names an application matches, as
// river.ErrNotFound is rivertype.ErrNotFound.
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
func clone(o sagadriver.Operation) sagadriver.Operation {
	o.Steps = append([]sagadriver.StepRecord(nil), o.Steps...)
	return o
}
