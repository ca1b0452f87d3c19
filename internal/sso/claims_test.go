package sso

import (
	"encoding/json"
	"testing"
)

// TestEmailVerifiedClaim: only a provider that says the email is verified
// (JSON true, or the string "true" some providers send) makes it so.
func TestEmailVerifiedClaim(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]bool{
		`true`: true, `"true"`: true,
		`false`: false, `"false"`: false, `"TRUE"`: false, `1`: false, `null`: false, `{}`: false, `[true]`: false, ``: false, `tru`: false,
	} {
		if got := claimTrue(json.RawMessage(raw)); got != want {
			t.Errorf("claimTrue(%s) = %v, want %v", raw, got, want)
		}
	}
}
