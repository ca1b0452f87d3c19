package demo

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// The signups' verifier answers from the saga's records: the operation of
// the key's digest exists (happened, with its ID) or not.
func TestSignupVerifier(t *testing.T) {
	t.Parallel()
	digest := strings.Repeat("ab", 32)
	s := &Signups{}
	_, err := s.Verifier().Verify(t.Context(), idem.Abandoned{KeyDigest: digest})
	require.Error(t, err, "not running: unknown")
	s.get = func(_ context.Context, id string) (sagadriver.Operation, error) {
		if id == SignupOperationID(digest) {
			return sagadriver.Operation{ID: id, Type: SignupType, Status: sagadriver.StatusRunning}, nil
		}
		return sagadriver.Operation{}, saga.ErrNotFound
	}
	v, err := s.Verifier().Verify(t.Context(), idem.Abandoned{KeyDigest: digest})
	require.NoError(t, err)
	require.Equal(t, idem.VerdictHappened, v.Verdict)
	require.Equal(t, SignupOperationID(digest), v.ExternalRef)
	require.Contains(t, v.Evidence, "running")
	v, err = s.Verifier().Verify(t.Context(), idem.Abandoned{KeyDigest: strings.Repeat("cd", 32)})
	require.NoError(t, err)
	require.Equal(t, idem.VerdictNotHappened, v.Verdict)
}
