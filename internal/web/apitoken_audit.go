package web

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/store"
)

// Audit actions of API tokens (SPEC K25).
const (
	ActionTokenCreate = "token.create"
	ActionTokenRevoke = "token.revoke"
)

// TokenAuditEntry is the audit entry of creating or revoking (action) the
// API token t by actor in role: it names the token by its name and ID,
// never its secret, and gives its owner, role and expiry. The console's
// admin page and "console token" append the same entry.
func TokenAuditEntry(action string, t store.APIToken, actor, role, reason string) audit.Entry {
	type state struct {
		Name      string `json:"name"`
		ID        int64  `json:"id"`
		User      string `json:"user,omitempty"`
		Role      string `json:"role,omitempty"`
		ExpiresAt string `json:"expires_at,omitempty"`
		Revoked   bool   `json:"revoked"`
	}
	s := state{Name: t.Name, ID: t.ID, User: t.Owner, Role: t.Role}
	if !t.ExpiresAt.IsZero() {
		s.ExpiresAt = t.ExpiresAt.UTC().Format(time.RFC3339)
	}
	var before json.RawMessage
	if action == ActionTokenRevoke {
		b, _ := json.Marshal(s) // a struct of strings: never fails
		before = b
		s.Revoked = true
	}
	after, _ := json.Marshal(s)
	return audit.Entry{Actor: actor, Role: role, Action: action, TargetKind: "api_token", TargetID: strconv.FormatInt(t.ID, 10),
		Reason: reason, Before: before, After: after, Outcome: audit.OutcomeApplied}
}
