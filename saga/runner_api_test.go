package saga

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRunnerExposesNoRecordWriter checks that the step machine is the only
// writer of operation state: no exported method of the
// runner returns something that writes operations' records around it, such
// as its Driver. Operator actions go through the operator API.
func TestRunnerExposesNoRecordWriter(t *testing.T) {
	writers := []string{"InsertOperation", "UpdateOperation", "InsertEvents", "InsertFinding", "ResolveFindings"}
	rt := reflect.TypeFor[*Runner[struct{}]]()
	require.Positive(t, rt.NumMethod())
	for i := range rt.NumMethod() {
		m := rt.Method(i)
		for j := range m.Type.NumOut() {
			out := m.Type.Out(j)
			for _, w := range writers {
				_, ok := out.MethodByName(w)
				require.Falsef(t, ok, "Runner.%s returns %s, which has %s: a write around the step machine", m.Name, out, w)
			}
		}
	}
}
