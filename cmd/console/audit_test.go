package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/driver/sqlite"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/pgtest"
)

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

func TestAuditVerify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// setup returns the --db URL of a trail of 5 entries and a func
		// that runs statements with the append-only triggers out of the way.
		setup func(t *testing.T) (url string, tamper func(stmts ...string))
	}{
		{"sqlite", func(t *testing.T) (string, func(...string)) {
			path := filepath.Join(t.TempDir(), "console.db")
			db, err := sqlite.Open(path)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, db.Close()) })
			appendEntries(t, audit.NewSQLite(db), 5)
			return "sqlite:" + path, func(stmts ...string) {
				for _, s := range append([]string{
					`DROP TRIGGER IF EXISTS unstuck_audit_entry_no_update`,
					`DROP TRIGGER IF EXISTS unstuck_audit_entry_no_delete`,
				}, stmts...) {
					_, err := db.ExecContext(t.Context(), s)
					require.NoError(t, err, s)
				}
			}
		}},
		{"postgres", func(t *testing.T) (string, func(...string)) {
			url := pgtest.Database(t)
			pool, err := pgxpool.New(t.Context(), url)
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			appendEntries(t, audit.NewPostgres(pool), 5)
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

			out, _, err := runConsole(t, nil, "audit", "verify", "--db", url)
			require.NoError(t, err)
			require.Contains(t, out, "audit trail verified: 5 entries\n")
			m := headLine.FindStringSubmatch(out)
			require.NotNil(t, m, "the head is printed: %s", out)
			head := m[1]
			require.Regexp(t, `^5:`, head)

			// The printed head verifies as an anchor; the URL may come
			// from the environment.
			out, _, err = runConsole(t, map[string]string{"UNSTUCK_DB": url}, "audit", "verify", "--anchor", head)
			require.NoError(t, err)
			require.Contains(t, out, "audit trail verified: 5 entries")

			// An edited entry: named by its seq, exit status non-zero.
			tamper(`UPDATE unstuck_audit_entry SET after_state = '{"status":"completed"}' WHERE seq = 3`)
			out, _, err = runConsole(t, nil, "audit", "verify", "--db", url)
			require.EqualError(t, err, "audit trail broken at seq 3: hash does not match the entry's content: the entry was altered")
			require.NotErrorIs(t, err, errUsage, "exit status 1, not 2")
			require.Contains(t, out, "2 entries verified before the break")
		})
	}
}

func TestAuditVerifyTruncatedTail(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "console.db")
	db, err := sqlite.Open(path)
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	appendEntries(t, audit.NewSQLite(db), 4)
	out, _, err := runConsole(t, nil, "audit", "verify", "--db", "sqlite:"+path)
	require.NoError(t, err)
	head := headLine.FindStringSubmatch(out)[1]

	for _, s := range []string{`DROP TRIGGER unstuck_audit_entry_no_delete`, `DELETE FROM unstuck_audit_entry WHERE seq = 4`} {
		_, err := db.ExecContext(context.Background(), s)
		require.NoError(t, err)
	}
	_, _, err = runConsole(t, nil, "audit", "verify", "--db", "sqlite:"+path)
	require.NoError(t, err, "a cut tail is consistent on its own")
	_, _, err = runConsole(t, nil, "audit", "verify", "--db", "sqlite:"+path, "--anchor", head)
	require.ErrorContains(t, err, "audit trail broken at seq 4: seq 4 is missing")
}

func TestAuditVerifyBadInput(t *testing.T) {
	t.Parallel()
	_, errOut, err := runConsole(t, nil, "audit")
	require.ErrorIs(t, err, errUsage)
	require.Contains(t, errOut, "console audit verify")

	_, errOut, err = runConsole(t, nil, "audit", "frobnicate")
	require.ErrorIs(t, err, errUsage)
	require.Contains(t, errOut, `unknown subcommand "frobnicate"`)

	_, errOut, err = runConsole(t, nil, "audit", "verify")
	require.ErrorIs(t, err, errUsage)
	require.Contains(t, errOut, "--db is required")

	_, errOut, err = runConsole(t, nil, "audit", "verify", "--db", "sqlite:/tmp/x.db", "--anchor", "12:beef")
	require.ErrorIs(t, err, errUsage)
	require.Contains(t, errOut, "not 64 hex digits")

	out, _, err := runConsole(t, nil, "audit", "verify", "--help")
	require.NoError(t, err)
	require.Contains(t, out, "--anchor", "help goes to stdout")

	// A database without the trail.
	_, _, err = runConsole(t, nil, "audit", "verify", "--db", "sqlite:"+filepath.Join(t.TempDir(), "empty.db"))
	require.ErrorIs(t, err, audit.ErrNotMigrated)
}
