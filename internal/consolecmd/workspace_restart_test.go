package consolecmd

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/internal/demo"
	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/saga/sagapgx"
	"github.com/unstuckhq/unstuck/saga/sagasqlite"
)

// reconcileAfterRestart builds what a restarted demo builds on db — its
// workspace provider and the signups' saga runner — and reconciles once.
func reconcileAfterRestart(ctx context.Context, t *testing.T, db *database) []sagadriver.Finding {
	t.Helper()
	var sdb demo.SignupDB = sqlSignupDB{db.SQL}
	if db.Pool != nil {
		sdb = pgxSignupDB{db.Pool}
	}
	ws, err := demoWorkspaces(ctx, sdb)
	require.NoError(t, err)
	def := demo.NewSignups(nil, sdb, ws, slog.New(slog.DiscardHandler)).Definition()
	cfg := saga.Config{Definitions: []saga.Definition{def}, Logger: slog.New(slog.DiscardHandler)}
	if db.Pool != nil {
		return reconcileOnce(ctx, t, sagapgx.New(db.Pool), cfg)
	}
	return reconcileOnce(ctx, t, sagasqlite.New(db.SQL), cfg)
}

func reconcileOnce[TTx any](ctx context.Context, t *testing.T, d sagadriver.Driver[TTx], cfg saga.Config) []sagadriver.Finding {
	t.Helper()
	runner, err := saga.NewRunner(d, cfg)
	require.NoError(t, err)
	found, err := runner.Reconcile(ctx)
	require.NoError(t, err)
	return found
}

// After a demo restart, reconciliation finds the
// workspaces of completed signups where the provider keeps them, and
// raises no finding (the in-memory provider forgot them all, and every
// completed signup became missing_external), on PostgreSQL and SQLite;
// and a workspace_permanent signup is compensated, never completed.
func TestDemoRestartReconcilesClean(t *testing.T) {
	t.Parallel()
	for _, d := range consoletest.DemoDatabases {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			url := d.URL(t)
			base := consoletest.StartDemo(t, run, url)
			var completed []string
			for i, mode := range []string{"", "", demo.SignupWorkspaceTimeoutAfterEffect} {
				body := `{"email":"restart-` + string(rune('a'+i)) + `@example.com"}`
				if mode != "" {
					body = `{"email":"restart-` + string(rune('a'+i)) + `@example.com","fail":"` + mode + `"}`
				}
				completed = append(completed, consoletest.PostSignup(t, base, consoletest.SignupKey(t, string(rune('a'+i))), body))
			}
			permanent := consoletest.PostSignup(t, base, consoletest.SignupKey(t, "p"), `{"email":"restart-p@example.com","fail":"workspace_permanent"}`)
			for _, id := range completed {
				consoletest.WaitSignup(t, base, id, sagadriver.StatusCompleted, 30*time.Second)
			}
			consoletest.WaitSignup(t, base, permanent, sagadriver.StatusCompensated, 30*time.Second)

			db, err := openDatabase(t.Context(), url)
			require.NoError(t, err)
			defer db.Close()
			found := reconcileAfterRestart(t.Context(), t, db)
			require.Empty(t, found, "a restart makes up no difference")
		})
	}
}
