package web_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
)

// rewriteAsLegacy rewrites the whole trail as legacy SHA-256 links, seq
// 1's actor changed, as the owner of the SQLite file can without the
// audit key.
func rewriteAsLegacy(t *testing.T, b *bundle) {
	t.Helper()
	entries, _, err := b.trail.List(context.Background(), audit.Filter{Limit: audit.MaxLimit})
	require.NoError(t, err)
	for _, s := range []string{`DROP TRIGGER unstuck_audit_entry_no_delete`, `DROP TRIGGER unstuck_audit_entry_keyed`, `DELETE FROM unstuck_audit_entry`} {
		_, err := b.sqlDB.Exec(s)
		require.NoError(t, err, s)
	}
	prev := make([]byte, 32)
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if e.Seq == 1 {
			e.Actor = "forged-nobody"
		}
		e.KeyID, e.PrevHash = "", prev
		e.Hash = e.ComputeHash()
		prev = e.Hash
		_, err := b.sqlDB.Exec(`INSERT INTO unstuck_audit_entry (seq, at, actor, role, action, target_kind, target_id, reason, before_state,
after_state, outcome, request_id, client_addr, user_agent, prev_hash, hash, key_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			e.Seq, e.At.UnixMicro(), e.Actor, e.Role, e.Action, e.TargetKind, e.TargetID, e.Reason, nullText(e.Before), nullText(e.After),
			e.Outcome, e.RequestID, e.ClientAddr, e.UserAgent, e.PrevHash, e.Hash, e.KeyID)
		require.NoError(t, err)
	}
}

func nullText(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// externalAt is a schedule of checkpoints outside the database whose
// newest one was made at the Unix microseconds it holds (0: none).
type externalAt struct{ at atomic.Int64 }

func (e *externalAt) Newest() (time.Time, bool) {
	us := e.at.Load()
	return time.UnixMicro(us), us != 0
}
func (e *externalAt) MaxAge() time.Duration { return 2 * time.Hour }

// SPEC K24 on /audit: a chain rewritten as legacy links by the file's
// owner is a broken chain, not "intact, not keyed yet"; the age of the
// newest checkpoint outside the database is shown, and an overdue one
// stands out.
func TestAuditRefusesADowngrade(t *testing.T) {
	t.Parallel()
	ext := &externalAt{}
	ext.at.Store(time.Now().Add(-3 * time.Hour).UnixMicro())
	b := setup(t, func(c *web.Config) {
		c.AuditVerifyEvery = 50 * time.Millisecond
		c.ExternalCheckpoints = ext
	})
	seedAudit(t, b)
	c := signIn(t, b, store.RoleAuditor)
	_, body := do(t, c, http.MethodGet, b.srv.URL+"/audit", nil)
	_, state, _ := chain(t, body)
	require.Equal(t, "verified", state)
	require.Contains(t, body, `data-testid="external-checkpoint" data-stale="true"`, "three hours old, the bound is two")

	rewriteAsLegacy(t, b)
	ext.at.Store(time.Now().Add(-time.Minute).UnixMicro())
	time.Sleep(100 * time.Millisecond)
	_, body = do(t, c, http.MethodGet, b.srv.URL+"/audit", nil)
	role, state, text := chain(t, body)
	require.Equal(t, []string{"alert", "broken"}, []string{role, state})
	require.Contains(t, text, "Hash chain broken at seq 1: the entry has no key ID, but the keying marker says every entry from seq 1 is keyed")
	require.Contains(t, body, `data-testid="external-checkpoint" data-stale="false"`)
}
