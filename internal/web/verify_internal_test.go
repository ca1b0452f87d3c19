package web

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/ops"
)

// The key page's note on its latest verification: waiting while no answer
// came after the latest request (its own, or the one it joined), the
// finding when the answer decided nothing, nothing once a decision was
// made.
func TestVerificationNote(t *testing.T) {
	t.Parallel()
	now := time.Now()
	finding, err := json.Marshal(map[string]any{"verification": map[string]string{"verdict": "unknown", "verifier": "payments", "error": "timeout", "evidence": "still processing"}})
	require.NoError(t, err)
	req := func(seq int64) audit.Entry {
		return audit.Entry{Seq: seq, Action: "key.verify", Outcome: ops.OutcomeRequested, Actor: "sam", At: now.Add(-time.Minute)}
	}
	for name, tc := range map[string]struct {
		hist []audit.Entry // newest first
		want string
	}{
		"None":    {nil, ""},
		"Waiting": {[]audit.Entry{req(1)}, "Verification requested by sam"},
		"Decided": {[]audit.Entry{{Seq: 2, Action: "key.confirm_happened", Outcome: audit.OutcomeApplied, RequestID: "verify-1"}, req(1)}, ""},
		"JoinedAnEarlierRequestThatWasDecided": {[]audit.Entry{
			{Seq: 3, Action: "key.confirm_happened", Outcome: audit.OutcomeApplied, RequestID: "verify-1"}, req(2), req(1)}, ""},
		"Finding": {[]audit.Entry{{Seq: 2, Action: "key.verify", Outcome: ops.OutcomeFinding, RequestID: "verify-1", After: finding, At: now}, req(1)},
			"by verifier payments: unknown (timeout) — still processing. Nothing was decided"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := verificationNote(now, tc.hist)
			if tc.want == "" {
				require.Empty(t, got)
				return
			}
			require.Contains(t, got, tc.want)
		})
	}
}
