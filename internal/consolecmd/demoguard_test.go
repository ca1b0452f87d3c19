package consolecmd

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/auth"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/internal/store"
)

// startAndStop runs the console with args until a line starts with ready,
// then stops it. It returns what it printed on stdout and its error: a
// refusal to start ends it before the line.
func startAndStop(t *testing.T, env map[string]string, ready string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, args, func(k string) string { return env[k] }, pw, io.Discard)
		_ = pw.Close()
	}()
	var out strings.Builder
	for lines := bufio.NewScanner(pr); lines.Scan(); {
		out.WriteString(lines.Text() + "\n")
		if strings.HasPrefix(lines.Text(), ready) {
			cancel() // and read on until it has stopped
		}
	}
	return out.String(), <-done
}

func demoOnce(t *testing.T, dbURL string, args ...string) (string, error) {
	t.Helper()
	return startAndStop(t, nil, "listening on ", append([]string{"demo", "--addr", "127.0.0.1:0", "--db", dbURL, "--traffic=false"}, args...)...)
}

// consoleStore opens dbURL's console store for the test.
func consoleStore(t *testing.T, dbURL string) *store.DB {
	t.Helper()
	db, err := openDatabase(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	return db.Console
}

func requirePassword(t *testing.T, db *store.DB, name, password string) {
	t.Helper()
	u, ok, err := db.UserByUsername(context.Background(), name)
	require.NoError(t, err)
	require.True(t, ok, name)
	require.NoError(t, auth.Verify(u.PasswordHash, password), "%s's password", name)
}

func addUser(t *testing.T, db *store.DB, name, role, password string) {
	t.Helper()
	hash, err := auth.Hash(password)
	require.NoError(t, err)
	_, err = db.CreateUser(context.Background(), name, role, hash)
	require.NoError(t, err)
}

func sqliteURL(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "demo.db") }

// TestDemoRefusesADatabaseItDidNotCreate checks that the demo runs only on
// a new database or one it created, never next to other accounts, unless
// --reset-demo-users.
func TestDemoRefusesADatabaseItDidNotCreate(t *testing.T) {
	t.Parallel()
	for _, dbs := range consoletest.DemoDatabases {
		newURL := dbs.URL
		t.Run(dbs.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()

			// A console's database: migrated, with an account, no marker.
			prod := newURL(t)
			_, _, err := runConsole(t, nil, "migrate", "--db", prod)
			require.NoError(t, err)
			users := consoleStore(t, prod)
			addUser(t, users, "ada", store.RoleAdmin, "ada-own-password")
			_, err = demoOnce(t, prod)
			require.ErrorContains(t, err, "was not created by console demo")
			_, ok, err := users.UserByUsername(ctx, "admin")
			require.NoError(t, err)
			require.False(t, ok, "no demo account was added")

			// Migrated, no account, no marker: still not the demo's.
			bare := newURL(t)
			_, _, err = runConsole(t, nil, "migrate", "--db", bare)
			require.NoError(t, err)
			_, err = demoOnce(t, bare)
			require.ErrorContains(t, err, "was not created by console demo")

			// The demo's own database with another account added since.
			own := newURL(t)
			_, err = demoOnce(t, own)
			require.NoError(t, err)
			addUser(t, consoleStore(t, own), "bob", store.RoleOncall, "bob-own-password")
			_, err = demoOnce(t, own)
			require.ErrorContains(t, err, "accounts that are not the demo's (bob)")

			// --reset-demo-users: run there anyway, with the public passwords.
			_, err = demoOnce(t, prod, "--reset-demo-users")
			require.NoError(t, err)
			requirePassword(t, users, "admin", "demo-admin")
			requirePassword(t, users, "ada", "ada-own-password")
		})
	}
}

// TestDemoNeverChangesAnExistingAccount checks that a second run of the
// demo on its own database creates missing demo accounts only: a changed
// password stays, a disabled account stays disabled.
func TestDemoNeverChangesAnExistingAccount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := sqliteURL(t)
	_, err := demoOnce(t, dbURL)
	require.NoError(t, err)
	users := consoleStore(t, dbURL)
	requirePassword(t, users, "admin", "demo-admin")
	hash, err := auth.Hash("admin-own-password")
	require.NoError(t, err)
	require.NoError(t, users.SetUserPassword(ctx, "admin", hash))
	require.NoError(t, users.SetUserDisabled(ctx, "oncall", true))

	out, err := demoOnce(t, dbURL)
	require.NoError(t, err)
	require.Contains(t, out, "kept between runs")
	require.Contains(t, out, "admin, oncall, support, auditor existed already and keep the password they had")
	requirePassword(t, users, "admin", "admin-own-password")
	u, _, err := users.UserByUsername(ctx, "oncall")
	require.NoError(t, err)
	require.True(t, u.Disabled, "oncall stays disabled")

	// --fresh starts from an empty database: the public passwords again,
	// and a new file of the console's own River jobs.
	riverFile := "sqlite:" + consoleRiverFile(strings.TrimPrefix(dbURL, "sqlite:"))
	sqliteExec(t, riverFile)(t, `CREATE TABLE left_by_the_last_run (x INTEGER)`)
	_, err = demoOnce(t, dbURL, "--fresh")
	require.NoError(t, err)
	sqliteExec(t, riverFile)(t, `CREATE TABLE left_by_the_last_run (x INTEGER)`) // fails if the old file is still there
	users = consoleStore(t, dbURL)
	requirePassword(t, users, "admin", "demo-admin")
	u, _, err = users.UserByUsername(ctx, "oncall")
	require.NoError(t, err)
	require.False(t, u.Disabled)
}

// TestDemoFreshDeletesOnlyTheDemosFile checks that --fresh refuses a file
// the demo did not create, and PostgreSQL.
func TestDemoFreshDeletesOnlyTheDemosFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "console.db")
	_, _, err := runConsole(t, nil, "migrate", "--db", "sqlite:"+path)
	require.NoError(t, err)
	_, err = demoOnce(t, "sqlite:"+path, "--fresh")
	require.ErrorContains(t, err, "nothing was deleted")
	_, err = os.Stat(path)
	require.NoError(t, err, "the file is still there")

	_, err = demoOnce(t, "postgres://postgres@127.0.0.1:1/none", "--fresh")
	require.ErrorContains(t, err, "--fresh starts a new SQLite file")
}

// TestServeRefusesTheDemoSecret checks that serve never opens or seals
// with the public demo secret.
func TestServeRefusesTheDemoSecret(t *testing.T) {
	t.Parallel()
	dbURL := sqliteURL(t)
	serve := func(env map[string]string) error {
		_, err := startAndStop(t, env, "console listening on ", "serve", "--addr", "127.0.0.1:0")
		return err
	}
	err := serve(map[string]string{"UNSTUCK_DB": dbURL, "UNSTUCK_SECRET": demoSecret})
	require.ErrorContains(t, err, "UNSTUCK_SECRET is the public demo secret")
	err = serve(map[string]string{"UNSTUCK_DB": dbURL, "UNSTUCK_SECRET": "serve-test-secret-0123456789abcdef",
		"UNSTUCK_PREVIOUS_SECRETS": "older-secret-0123456789abcdef0123, " + demoSecret})
	require.ErrorContains(t, err, "UNSTUCK_PREVIOUS_SECRETS lists the public demo secret")
}

// TestServeRefusesDemoPasswords checks that serve refuses to start while an
// enabled demo account still has its public password, unless
// --allow-demo-users.
func TestServeRefusesDemoPasswords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := sqliteURL(t)
	_, err := demoOnce(t, dbURL)
	require.NoError(t, err)
	env := map[string]string{"UNSTUCK_DB": dbURL, "UNSTUCK_SECRET": "serve-test-secret-0123456789abcdef", "UNSTUCK_AUDIT_KEY": testAuditKey}
	serve := func(args ...string) error {
		_, err := startAndStop(t, env, "console listening on ", append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
		return err
	}
	err = serve()
	require.ErrorContains(t, err, "public demo password demo-<name>: admin, oncall, support, auditor")

	require.NoError(t, serve("--allow-demo-users"))

	users := consoleStore(t, dbURL)
	hash, err := auth.Hash("admin-own-password")
	require.NoError(t, err)
	require.NoError(t, users.SetUserPassword(ctx, "admin", hash))
	for _, name := range []string{"oncall", "support"} {
		require.NoError(t, users.SetUserDisabled(ctx, name, true))
	}
	require.ErrorContains(t, serve(), "public demo password demo-<name>: auditor.")
	require.NoError(t, users.SetUserDisabled(ctx, "auditor", true))
	require.NoError(t, serve(), "no enabled account has its demo password")
}
