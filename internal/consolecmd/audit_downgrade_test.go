package consolecmd

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/audit"
)

// rewriteLegacy rewrites every entry of the trail in the SQLite file at
// path as a legacy SHA-256 link, seq 1's actor changed, as the file's
// owner can without the audit key; more runs first.
func rewriteLegacy(t *testing.T, trail *audit.Trail, path string, more ...string) {
	t.Helper()
	entries, _, err := trail.List(t.Context(), audit.Filter{Limit: audit.MaxLimit})
	require.NoError(t, err)
	db, err := idemsqlite.Open(path)
	require.NoError(t, err)
	defer db.Close()
	for _, s := range append(more, `DROP TRIGGER IF EXISTS unstuck_audit_entry_no_delete`, `DROP TRIGGER IF EXISTS unstuck_audit_entry_keyed`,
		`DELETE FROM unstuck_audit_entry`) {
		_, err := db.ExecContext(t.Context(), s)
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
		_, err := db.ExecContext(t.Context(), `INSERT INTO unstuck_audit_entry (seq, at, actor, role, action, target_kind, target_id, reason,
before_state, after_state, outcome, request_id, client_addr, user_agent, prev_hash, hash, key_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, e.Seq, e.At.UnixMicro(), e.Actor, e.Role, e.Action, e.TargetKind, e.TargetID,
			e.Reason, string(e.Before), string(e.After), e.Outcome, e.RequestID, e.ClientAddr, e.UserAgent, e.PrevHash, e.Hash, e.KeyID)
		require.NoError(t, err)
	}
}

// SPEC K24 with the command an auditor runs: a SQLite trail rewritten
// from seq 1 as legacy links with chosen content fails verification (exit
// status 1, never "verified / not keyed yet"); with the marker replaced
// and the stored checkpoints deleted too, verification still fails unless
// --allow-legacy, and a checkpoint kept outside the database catches it
// even then.
func TestAuditVerifyRefusesADowngrade(t *testing.T) {
	t.Parallel()
	trail, url, _ := sqliteTrail(t)
	appendEntries(t, trail, 5)
	outside := t.TempDir()
	out, errOut, err := runConsole(t, auditEnv(url), "audit", "checkpoint", "--out", outside)
	require.NoError(t, err, errOut)
	files, err := filepath.Glob(filepath.Join(outside, checkpointFilePrefix+"*"))
	require.NoError(t, err)
	require.Len(t, files, 1, "a new file in the directory")
	kept, err := os.ReadFile(files[0])
	require.NoError(t, err)
	require.Equal(t, out, string(kept), "the line printed")

	path := url[len("sqlite:"):]
	rewriteLegacy(t, trail, path)
	out, _, err = runConsole(t, auditEnv(url), "audit", "verify")
	require.ErrorContains(t, err, "audit trail broken at seq 1: the entry has no key ID, but the keying marker says every entry from seq 1 is keyed")
	require.NotErrorIs(t, err, errUsage, "exit status 1")
	require.NotContains(t, out, "audit trail verified")

	// The owner replaces the marker with one saying "never keyed" and
	// deletes the stored checkpoints.
	rewriteLegacy(t, trail, path, `DELETE FROM unstuck_audit_keying`, `INSERT INTO unstuck_audit_keying (id, keyed_from) VALUES (1, 6)`,
		`DELETE FROM unstuck_audit_checkpoint`)
	_, _, err = runConsole(t, auditEnv(url), "audit", "verify")
	require.ErrorContains(t, err, "audit trail not keyed: every entry is a legacy SHA-256 link")
	out, _, err = runConsole(t, auditEnv(url), "audit", "verify", "--allow-legacy")
	require.NoError(t, err, "what a trail from before the key looks like")
	require.Contains(t, out, "not keyed yet")
	_, _, err = runConsole(t, auditEnv(url), "audit", "verify", "--allow-legacy", "--checkpoint-file", outside)
	require.ErrorContains(t, err, "the keying marker says keyed from seq 6, the checkpoint of seq 5 says 1: the marker was rewritten")
}

// SPEC K24: the console writes a checkpoint outside the database at start
// and on a schedule, reports when on /metrics, and the files it wrote
// catch a tail cut that the chain alone cannot show.
func TestScheduledCheckpointsCatchATailCut(t *testing.T) {
	t.Parallel()
	trail, url, tamper := sqliteTrail(t)
	appendEntries(t, trail, 3)
	dir, every := t.TempDir(), time.Hour
	f := checkpointFlags{dir: &dir, every: &every}
	require.NoError(t, f.check())
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	x := startExternalCheckpoints(ctx, trail, f, reg, slog.New(slog.DiscardHandler))
	var at time.Time
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var ok bool
		if at, ok = x.Newest(); ok {
			break
		}
		require.True(t, time.Now().Before(deadline), "no checkpoint written at start")
	}
	cs, err := readCheckpoints(dir)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	require.EqualValues(t, 3, cs[0].Seq)
	require.Equal(t, at, cs[0].At)
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range families {
		got[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
	}
	require.InDelta(t, float64(at.UnixMicro())/1e6, got["unstuck_audit_checkpoint_external_last_success_timestamp_seconds"], 1e-3)
	require.Equal(t, 7200.0, got["unstuck_audit_checkpoint_external_max_age_seconds"])

	tamper(`DELETE FROM unstuck_audit_entry WHERE seq = 3`, `DELETE FROM unstuck_audit_checkpoint`)
	_, _, err = runConsole(t, auditEnv(url), "audit", "verify")
	require.NoError(t, err, "a cut tail is consistent on its own")
	_, _, err = runConsole(t, auditEnv(url), "audit", "verify", "--checkpoint-file", dir)
	require.ErrorContains(t, err, "audit trail broken at seq 3: seq 3 is missing")

	bad := filepath.Join(t.TempDir(), "not-a-dir")
	require.ErrorContains(t, checkpointFlags{dir: &bad, every: &every}.check(), "is not a directory")
	short := time.Second
	require.ErrorContains(t, checkpointFlags{dir: &dir, every: &short}.check(), "at least 1m")
}
