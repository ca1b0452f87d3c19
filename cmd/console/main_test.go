package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.RunMain(m) }

func runConsole(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = run(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestHelp(t *testing.T) {
	t.Parallel()
	out, _, err := runConsole(t, nil, "--help")
	require.NoError(t, err)
	require.Contains(t, out, "migrate")

	_, errOut, err := runConsole(t, nil)
	require.ErrorIs(t, err, errUsage)
	require.Contains(t, errOut, "Usage:")

	_, errOut, err = runConsole(t, nil, "frobnicate")
	require.ErrorIs(t, err, errUsage)
	require.Contains(t, errOut, `unknown command "frobnicate"`)

	_, errOut, err = runConsole(t, nil, "migrate", "--help")
	require.NoError(t, err)
	require.Contains(t, errOut, "--db")
}

func TestMigrateSQLite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "console.db")
	for range 2 { // idempotent
		out, _, err := runConsole(t, nil, "migrate", "--db", "sqlite:"+path)
		require.NoError(t, err)
		require.Contains(t, out, "migrated sqlite:"+path)
	}
	// The URL may also come from the environment.
	out, _, err := runConsole(t, map[string]string{"UNSTUCK_DB": "sqlite:" + path}, "migrate")
	require.NoError(t, err)
	require.Contains(t, out, "migrated")
}

func TestMigratePostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.Database(t)
	for range 2 {
		_, _, err := runConsole(t, nil, "migrate", "--db", url)
		require.NoError(t, err)
	}
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var n int
	require.NoError(t, conn.QueryRow(context.Background(), "SELECT count(*) FROM unstuck_migration WHERE line = 'idem'").Scan(&n))
	require.Positive(t, n)
	require.NoError(t, conn.QueryRow(context.Background(), "SELECT count(*) FROM unstuck_idem_record").Scan(&n))
	require.Zero(t, n)
}

func TestMigrateBadInput(t *testing.T) {
	t.Parallel()
	_, errOut, err := runConsole(t, nil, "migrate")
	require.ErrorIs(t, err, errUsage)
	require.Contains(t, errOut, "--db is required")

	_, _, err = runConsole(t, nil, "migrate", "--db", "mysql://user:hunter2@host/db")
	require.ErrorContains(t, err, "must start with postgres://")
	require.NotContains(t, err.Error(), "hunter2", "a password is never echoed")

	_, _, err = runConsole(t, nil, "migrate", "--db", "sqlite:")
	require.ErrorContains(t, err, "needs a path")

	_, _, err = runConsole(t, nil, "migrate", "--db", "postgres://postgres:hunter2@127.0.0.1:1/none?connect_timeout=2")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "hunter2")

	_, errOut, err = runConsole(t, nil, "migrate", "--db", "sqlite:/tmp/x.db", "extra")
	require.ErrorIs(t, err, errUsage)
	require.Contains(t, errOut, "unexpected argument")
}

func TestUserCommands(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "users.db")
	_, _, err := runConsole(t, nil, "migrate", "--db", db)
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	env := func(string) string { return "" }

	// A password from stdin.
	err = runWithStdin(context.Background(), []string{"user", "add", "--db", db, "--username", "ada", "--role", "oncall"}, env,
		strings.NewReader("a-long-enough-password\n"), &out, &errOut)
	require.NoError(t, err)
	require.Contains(t, out.String(), "added user ada with role oncall")
	require.NotContains(t, out.String(), "a-long-enough-password", "a given password is never printed")

	// A generated password, printed once.
	out.Reset()
	err = runWithStdin(context.Background(), []string{"user", "add", "--db", db, "--username", "bob", "--role", "auditor"}, env, strings.NewReader(""), &out, &errOut)
	require.NoError(t, err)
	require.Regexp(t, `generated password \(shown once\): \S{20}`, out.String())

	err = runWithStdin(context.Background(), []string{"user", "add", "--db", db, "--username", "ada", "--role", "oncall"}, env, strings.NewReader("another-long-password\n"), &out, &errOut)
	require.ErrorContains(t, err, "add ada")
	err = runWithStdin(context.Background(), []string{"user", "add", "--db", db, "--username", "eve", "--role", "root"}, env, strings.NewReader(""), &out, &errOut)
	require.ErrorIs(t, err, errUsage)
	err = runWithStdin(context.Background(), []string{"user", "add", "--db", db, "--username", "eve", "--role", "admin"}, env, strings.NewReader("short\n"), &out, &errOut)
	require.ErrorContains(t, err, "at least 12")

	out.Reset()
	require.NoError(t, runWithStdin(context.Background(), []string{"user", "disable", "--db", db, "--username", "ada"}, env, nil, &out, &errOut))
	require.Contains(t, out.String(), "disabled user ada")
	err = runWithStdin(context.Background(), []string{"user", "disable", "--db", db, "--username", "nobody"}, env, nil, &out, &errOut)
	require.Error(t, err)
}

func TestServe(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "serve.db")
	_, errOut, err := runConsole(t, map[string]string{"UNSTUCK_DB": db}, "serve", "--addr", "127.0.0.1:0")
	require.ErrorContains(t, err, "UNSTUCK_SECRET", errOut)
	_, _, err = runConsole(t, nil, "serve", "--addr", "127.0.0.1:0")
	require.ErrorIs(t, err, errUsage, "no database")
	// No audit key: a clear refusal, before anything is opened.
	_, errOut, err = runConsole(t, map[string]string{"UNSTUCK_DB": db, "UNSTUCK_SECRET": "serve-test-secret-0123456789abcdef"}, "serve", "--addr", "127.0.0.1:0")
	require.ErrorContains(t, err, "UNSTUCK_AUDIT_KEY must be set to at least 32 bytes", errOut)

	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	env := map[string]string{"UNSTUCK_DB": db, "UNSTUCK_SECRET": "serve-test-secret-0123456789abcdef", "UNSTUCK_AUDIT_KEY": testAuditKey}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0"}, func(k string) string { return env[k] }, pw, io.Discard)
		_ = pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err)
	base, ok := strings.CutPrefix(strings.TrimSpace(line), "console listening on ")
	require.True(t, ok, line)
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	resp, err := http.Get(base + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the embedded default migrated itself")
	resp, err = http.Get(base + "/login")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, err = http.Get(base + "/metrics")
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(metrics), "\nunstuck_clock_skew_seconds ", "issue 9 item 4: serve exports the clock skew")
	cancel()
	require.NoError(t, <-done)
}
