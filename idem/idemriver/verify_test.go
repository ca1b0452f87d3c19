package idemriver_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemriver"
)

// SPEC K19: a verifier's answer is one of happened (with a reference),
// not happened or unknown; a verifier that panics, hangs, fails or answers
// nonsense yields unknown with the reason, never a decision, and its
// evidence is bounded.
func TestVerifyWorkerAnswers(t *testing.T) {
	t.Parallel()
	args := idemriver.VerifyArgs{RecordID: 7, Version: 3, Scope: "tenant:a", Operation: "POST /charges", KeyDigest: strings.Repeat("ab", 32), ExternalRef: "ref-sent"}
	for name, tc := range map[string]struct {
		v               idem.VerifierFunc
		verdict, ref    string
		errPart         string
		evidenceLenUpTo int
	}{
		"Happened": {v: func(_ context.Context, a idem.Abandoned) (idem.Verification, error) {
			require.Equal(t, "POST /charges", a.Operation)
			require.Equal(t, "ref-sent", a.ExternalRef)
			require.Equal(t, "abababababab", a.KeyID)
			return idem.Verification{Verdict: idem.VerdictHappened, ExternalRef: "ch_9", Evidence: "1999 cents"}, nil
		}, verdict: idemriver.AnswerHappened, ref: "ch_9"},
		"HappenedTakesTheRecordsReference": {v: func(context.Context, idem.Abandoned) (idem.Verification, error) {
			return idem.Verification{Verdict: idem.VerdictHappened}, nil
		}, verdict: idemriver.AnswerHappened, ref: "ref-sent"},
		"NotHappened": {v: func(context.Context, idem.Abandoned) (idem.Verification, error) {
			return idem.Verification{Verdict: idem.VerdictNotHappened}, nil
		}, verdict: idemriver.AnswerNotHappened},
		"Unknown": {v: func(context.Context, idem.Abandoned) (idem.Verification, error) {
			return idem.Verification{Verdict: idem.VerdictUnknown, Evidence: "still processing"}, nil
		}, verdict: idemriver.AnswerUnknown},
		"Error": {v: func(context.Context, idem.Abandoned) (idem.Verification, error) {
			return idem.Verification{}, errors.New("provider 503")
		}, verdict: idemriver.AnswerUnknown, errPart: "error: provider 503"},
		"Panic": {v: func(context.Context, idem.Abandoned) (idem.Verification, error) {
			panic("boom")
		}, verdict: idemriver.AnswerUnknown, errPart: "panic"},
		"Hang": {v: func(context.Context, idem.Abandoned) (idem.Verification, error) {
			select {} // ignores its context
		}, verdict: idemriver.AnswerUnknown, errPart: "timeout"},
		"Garbage": {v: func(context.Context, idem.Abandoned) (idem.Verification, error) {
			return idem.Verification{Verdict: idem.Verdict(42), Evidence: strings.Repeat("é", 2000)}, nil
		}, verdict: idemriver.AnswerUnknown, errPart: "invalid answer", evidenceLenUpTo: idemriver.MaxEvidence},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := idemriver.NewVerifyWorker(200 * time.Millisecond)
			require.NoError(t, w.Register("POST /charges", "provider", tc.v))
			a := args
			if name == "HappenedTakesTheRecordsReference" {
				a.ExternalRef = "ref-sent"
			}
			ans := w.Answer(t.Context(), a)
			require.Equal(t, tc.verdict, ans.Verdict)
			require.Equal(t, tc.ref, ans.ExternalRef)
			require.Equal(t, "provider", ans.Verifier)
			require.Contains(t, ans.Error, tc.errPart)
			require.False(t, ans.At.IsZero())
			if tc.evidenceLenUpTo > 0 {
				require.LessOrEqual(t, len(ans.Evidence), tc.evidenceLenUpTo)
				require.NotEmpty(t, ans.Evidence)
			}
		})
	}

	t.Run("NoVerifier", func(t *testing.T) {
		t.Parallel()
		ans := idemriver.NewVerifyWorker(0).Answer(t.Context(), args)
		require.Equal(t, idemriver.AnswerNoVerifier, ans.Verdict)
	})
	t.Run("HappenedWithoutAnyReference", func(t *testing.T) {
		t.Parallel()
		w := idemriver.NewVerifyWorker(0)
		require.NoError(t, w.Register("POST /charges", "provider", idem.VerifierFunc(func(context.Context, idem.Abandoned) (idem.Verification, error) {
			return idem.Verification{Verdict: idem.VerdictHappened}, nil
		})))
		a := args
		a.ExternalRef = ""
		ans := w.Answer(t.Context(), a)
		require.Equal(t, idemriver.AnswerUnknown, ans.Verdict, "confirming needs a reference")
		require.Contains(t, ans.Error, "without a usable reference")
	})
	t.Run("Register", func(t *testing.T) {
		t.Parallel()
		require.Error(t, idemriver.NewVerifyWorker(0).Register("", "x", idem.VerifierFunc(nil)))
		require.Error(t, idemriver.NewVerifyWorker(0).Register("op", "x", nil))
	})
}
