// Package idemsql recognizes statements of idem/idempgx as they travel on
// the wire, for the fault experiments (cmd/faults), which cut one kind of
// statement between the driver and PostgreSQL. The driver's own tests hold
// it to the driver's statements (idempgx TestFaultsKnowTheCompletion), so
// a statement that changes shape fails there, not as an experiment that
// silently injects no fault.
//
// It is test support for this repository's suites, public so that the
// library's tests, the console's and the tools share it; adopters may use
// it, with no compatibility promise before v1.
package idemsql

import "strings"

// IsCompletion reports whether sql is one of the store's completion
// statements (idempgx completeSQL and completeByIDSQL: the owner's final
// UPDATE of a record, which sets the status and the result from
// parameters). An operator's settle, which also sets the status, clears
// the result (result = NULL) and is not a completion.
func IsCompletion(sql string) bool {
	norm := strings.Join(strings.Fields(sql), " ")
	rest, ok := strings.CutPrefix(norm, "UPDATE unstuck_idem_record SET status = $")
	return ok && strings.Contains(rest, ", result = $")
}
