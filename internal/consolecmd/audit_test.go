package consolecmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

// testAuditKey is UNSTUCK_AUDIT_KEY in the tests.
const testAuditKey = "console-test-audit-key-0123456789abcdef"

// auditEnv is the environment of an audit command: the key, and the
// database URL when not empty.
func auditEnv(url string) map[string]string {
	env := map[string]string{"UNSTUCK_AUDIT_KEY": testAuditKey}
	if url != "" {
		env["UNSTUCK_DB"] = url
	}
	return env
}

// keyedTrail is the trail on db or pool, with the tests' audit key.
func keyedTrail(t *testing.T, db *database) *audit.Trail {
	t.Helper()
	keys, err := auditKeysFromEnv(func(k string) string { return auditEnv("")[k] })
	require.NoError(t, err)
	db.useAuditKeys(keys)
	return db.Trail
}

// appendEntries appends n decisions to trail.
func appendEntries(t *testing.T, trail *audit.Trail, n int) {
	t.Helper()
	require.NoError(t, trail.Migrate(t.Context()))
	for i := range n {
		_, err := trail.Append(t.Context(), audit.Entry{
			Actor: "ada", Role: "oncall", Action: "key.forget", TargetKind: "key", TargetID: fmt.Sprint(i),
			Reason: "customer confirmed by phone", Before: json.RawMessage(`{"status":"unavailable"}`),
			After: json.RawMessage(`{"status":"released"}`), Outcome: audit.OutcomeApplied,
		})
		require.NoError(t, err)
	}
}

var headLine = regexp.MustCompile(`(?m)^head: (\d+:[0-9a-f]{64})$`)

// sqliteTrail is a keyed trail in a new SQLite file, its --db URL and a
// func that runs statements with the append-only triggers out of the way.
func sqliteTrail(t *testing.T) (*audit.Trail, string, func(stmts ...string)) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "console.db")
	db, err := idemsqlite.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	trail := keyedTrail(t, &database{SQL: db})
	require.NoError(t, trail.Migrate(t.Context()))
	return trail, "sqlite:" + path, func(stmts ...string) {
		for _, s := range append([]string{
			`DROP TRIGGER IF EXISTS unstuck_audit_entry_no_update`,
			`DROP TRIGGER IF EXISTS unstuck_audit_entry_no_delete`,
		}, stmts...) {
			_, err := db.ExecContext(t.Context(), s)
			require.NoError(t, err, s)
		}
	}
}

func TestAuditVerify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// setup returns the --db URL of a trail of 5 entries and a func
		// that runs statements with the append-only triggers out of the way.
		setup func(t *testing.T) (url string, tamper func(stmts ...string))
	}{
		{"sqlite", func(t *testing.T) (string, func(...string)) {
			trail, url, tamper := sqliteTrail(t)
			appendEntries(t, trail, 5)
			return url, tamper
		}},
		{"postgres", func(t *testing.T) (string, func(...string)) {
			url := pgtest.Database(t)
			pool, err := pgxpool.New(t.Context(), url)
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			appendEntries(t, keyedTrail(t, &database{Pool: pool}), 5)
			return url, func(stmts ...string) {
				conn, err := pool.Acquire(t.Context())
				require.NoError(t, err)
				defer conn.Release()
				// As a superuser: skip the triggers on this connection.
				for _, s := range append([]string{`SET session_replication_role = replica`}, stmts...) {
					_, err := conn.Exec(t.Context(), s)
					require.NoError(t, err, s)
				}
				_, err = conn.Exec(t.Context(), `RESET session_replication_role`)
				require.NoError(t, err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url, tamper := tc.setup(t)

			out, _, err := runConsole(t, auditEnv(""), "audit", "verify", "--db", url)
			require.NoError(t, err)
			require.Contains(t, out, "audit trail verified: 5 entries\n")
			require.Contains(t, out, "keyed: every entry is MACed with the audit key\n")
			m := headLine.FindStringSubmatch(out)
			require.NotNil(t, m, "the head is printed: %s", out)
			head := m[1]
			require.Regexp(t, `^5:`, head)

			// The printed head verifies as an anchor; the URL may come
			// from the environment.
			out, _, err = runConsole(t, auditEnv(url), "audit", "verify", "--anchor", head)
			require.NoError(t, err)
			require.Contains(t, out, "audit trail verified: 5 entries")

			// Without the key, or with another one, nothing verifies.
			_, _, err = runConsole(t, map[string]string{"UNSTUCK_DB": url}, "audit", "verify")
			require.ErrorContains(t, err, "UNSTUCK_AUDIT_KEY must be set")
			_, _, err = runConsole(t, map[string]string{"UNSTUCK_DB": url, "UNSTUCK_AUDIT_KEY": strings.Repeat("x", 32)}, "audit", "verify")
			require.ErrorContains(t, err, "audit trail broken at seq 1: the keying marker names audit key ID")

			// An edited entry: named by its seq, exit status non-zero.
			tamper(`UPDATE unstuck_audit_entry SET after_state = '{"status":"completed"}' WHERE seq = 3`)
			out, _, err = runConsole(t, auditEnv(""), "audit", "verify", "--db", url)
			require.ErrorContains(t, err, "audit trail broken at seq 3: hash is not the MAC of the entry's content under audit key ")
			require.NotErrorIs(t, err, errUsage, "exit status 1, not 2")
			require.Contains(t, out, "2 entries verified before the break")
		})
	}
}

func TestAuditVerifyTruncatedTail(t *testing.T) {
	t.Parallel()
	trail, url, tamper := sqliteTrail(t)
	appendEntries(t, trail, 4)
	out, _, err := runConsole(t, auditEnv(url), "audit", "verify")
	require.NoError(t, err)
	head := headLine.FindStringSubmatch(out)[1]

	tamper(`DELETE FROM unstuck_audit_entry WHERE seq = 4`)
	_, _, err = runConsole(t, auditEnv(url), "audit", "verify")
	require.NoError(t, err, "a cut tail is consistent on its own")
	_, _, err = runConsole(t, auditEnv(url), "audit", "verify", "--anchor", head)
	require.ErrorContains(t, err, "audit trail broken at seq 4: seq 4 is missing")
}

// TestAuditCheckpoint: a printed checkpoint, kept outside the database,
// catches a tail that was rewritten (here even with the key) or cut, and
// the database's own checkpoints being rewritten along with it.
func TestAuditCheckpoint(t *testing.T) {
	t.Parallel()
	trail, url, tamper := sqliteTrail(t)
	_, _, err := runConsole(t, auditEnv(url), "audit", "checkpoint")
	require.ErrorIs(t, err, audit.ErrEmpty, "nothing to checkpoint yet")
	appendEntries(t, trail, 5)

	out, errOut, err := runConsole(t, auditEnv(url), "audit", "checkpoint")
	require.NoError(t, err, errOut)
	line := strings.TrimSpace(out)
	require.Regexp(t, `^unstuck-audit-checkpoint/v3 5 [0-9a-f]{64} \S+Z 1 [0-9a-f]{16} [0-9a-f]{64}$`, line, "one line, for >> a file")
	stored, ok, err := trail.LastCheckpoint(t.Context())
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, line, stored.String(), "stored as printed")

	out, _, err = runConsole(t, auditEnv(url), "audit", "verify", "--checkpoint", line)
	require.NoError(t, err)
	require.Contains(t, out, "checkpoints verified: 1", "the line given (the stored one is the same)")

	// A line edited to fit another chain: its MAC does not verify.
	forged := strings.Replace(line, "checkpoint/v3 5 ", "checkpoint/v3 4 ", 1)
	_, _, err = runConsole(t, auditEnv(url), "audit", "verify", "--checkpoint", forged)
	require.ErrorIs(t, err, audit.ErrBadCheckpoint)

	// Rewrite the tail from seq 4 and the stored checkpoints: the chain
	// verifies on its own, and a new checkpoint can even be made, but the
	// kept line tells.
	tamper(`DELETE FROM unstuck_audit_entry WHERE seq >= 4`, `DELETE FROM unstuck_audit_checkpoint`)
	appendEntries(t, trail, 2)
	_, _, err = runConsole(t, auditEnv(url), "audit", "verify")
	require.NoError(t, err)
	_, _, err = runConsole(t, auditEnv(url), "audit", "checkpoint")
	require.NoError(t, err)
	_, _, err = runConsole(t, auditEnv(url), "audit", "verify", "--checkpoint", line)
	require.EqualError(t, err, "audit trail broken at seq 5: hash differs from the anchor: the chain was rewritten at or before this seq")

	// Cut back to seq 3: the kept line names a seq beyond the end.
	tamper(`DELETE FROM unstuck_audit_entry WHERE seq >= 4`, `DELETE FROM unstuck_audit_checkpoint`)
	_, _, err = runConsole(t, auditEnv(url), "audit", "verify", "--checkpoint", line)
	require.ErrorContains(t, err, "audit trail broken at seq 4: seq 4 is missing")
}

func TestAuditKeysFromEnv(t *testing.T) {
	t.Parallel()
	const secret = "app-secret-0123456789abcdef0123456789"
	for _, tc := range []struct {
		name string
		env  map[string]string
		err  string
	}{
		{"missing", map[string]string{}, "UNSTUCK_AUDIT_KEY must be set to at least 32 bytes"},
		{"short", map[string]string{"UNSTUCK_AUDIT_KEY": "short"}, "UNSTUCK_AUDIT_KEY must be set to at least 32 bytes"},
		{"the application secret", map[string]string{"UNSTUCK_AUDIT_KEY": secret, "UNSTUCK_SECRET": secret}, "UNSTUCK_AUDIT_KEY must not be an application secret"},
		{"a previous application secret", map[string]string{"UNSTUCK_AUDIT_KEY": testAuditKey, "UNSTUCK_SECRET": secret,
			"UNSTUCK_AUDIT_PREVIOUS_KEYS": secret + "-old", "UNSTUCK_PREVIOUS_SECRETS": "x, " + secret + "-old"}, "UNSTUCK_AUDIT_PREVIOUS_KEYS (key 1) must not be an application secret"},
		{"the public demo key", map[string]string{"UNSTUCK_AUDIT_KEY": string(demoAuditKey(demoSecret))}, "public demo's audit key"},
		{"a short previous key", map[string]string{"UNSTUCK_AUDIT_KEY": testAuditKey, "UNSTUCK_AUDIT_PREVIOUS_KEYS": "short"}, "previous audit key 1 is 5 bytes"},
	} {
		_, err := auditKeysFromEnv(func(k string) string { return tc.env[k] })
		require.ErrorContains(t, err, tc.err, tc.name)
		for _, v := range tc.env {
			if len(v) >= 32 {
				require.NotContains(t, err.Error(), v, "%s: the error never holds a key", tc.name)
			}
		}
	}
	old := "old-audit-key-0123456789abcdef0123456789"
	keys, err := auditKeysFromEnv(func(k string) string {
		return map[string]string{"UNSTUCK_AUDIT_KEY": testAuditKey, "UNSTUCK_AUDIT_PREVIOUS_KEYS": " " + old + " ,", "UNSTUCK_SECRET": secret}[k]
	})
	require.NoError(t, err)
	require.Equal(t, audit.KeyID([]byte(testAuditKey)), keys.CurrentID())
	require.True(t, keys.Has(audit.KeyID([]byte(old))), "the previous key verifies")
}

// TestDemoAuditKeys: the demo MACs its trail with UNSTUCK_AUDIT_KEY when
// set, else with a key derived from its secret, and says so.
func TestDemoAuditKeys(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	keys, err := demoAuditKeys(func(string) string { return "" }, demoSecret, log)
	require.NoError(t, err)
	require.Equal(t, audit.KeyID(demoAuditKey(demoSecret)), keys.CurrentID())
	require.Contains(t, logs.String(), "UNSTUCK_AUDIT_KEY is not set")

	logs.Reset()
	keys, err = demoAuditKeys(func(k string) string { return auditEnv("")[k] }, demoSecret, log)
	require.NoError(t, err)
	require.Equal(t, audit.KeyID([]byte(testAuditKey)), keys.CurrentID())
	require.Empty(t, logs.String())
}

func TestAuditVerifyBadInput(t *testing.T) {
	t.Parallel()
	_, errOut, err := runConsole(t, nil, "audit")
	require.ErrorIs(t, err, errUsage)
	require.Contains(t, errOut, "console audit verify")

	_, errOut, err = runConsole(t, nil, "audit", "frobnicate")
	require.ErrorIs(t, err, errUsage)
	require.Contains(t, errOut, `unknown subcommand "frobnicate"`)

	for _, sub := range []string{"verify", "checkpoint"} {
		_, errOut, err = runConsole(t, auditEnv(""), "audit", sub)
		require.ErrorIs(t, err, errUsage)
		require.Contains(t, errOut, "--db is required")
	}

	_, errOut, err = runConsole(t, auditEnv(""), "audit", "verify", "--db", "sqlite:/tmp/x.db", "--anchor", "12:beef")
	require.ErrorIs(t, err, errUsage)
	require.Contains(t, errOut, "not 64 hex digits")
	_, errOut, err = runConsole(t, auditEnv(""), "audit", "verify", "--db", "sqlite:/tmp/x.db", "--checkpoint", "unstuck-audit-checkpoint/v2 1 beef")
	require.ErrorIs(t, err, errUsage)
	require.Contains(t, errOut, "invalid checkpoint")

	out, _, err := runConsole(t, map[string]string{"UNSTUCK_DB": "postgres://u:hunter2-password@db/x"}, "audit", "verify", "--help")
	require.NoError(t, err)
	require.Contains(t, out, "--anchor", "help goes to stdout")
	require.Contains(t, out, "--checkpoint")
	require.NotContains(t, out, "hunter2", "the URL from the environment is printed redacted")

	// A database without the trail: PostgreSQL is migrated deliberately
	// (SQLite migrates itself for every command).
	_, _, err = runConsole(t, auditEnv(""), "audit", "verify", "--db", pgtest.Database(t))
	require.ErrorIs(t, err, audit.ErrNotMigrated)
}
