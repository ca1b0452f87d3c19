package consolecmd

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idempgx"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
	"github.com/unstuckhq/unstuck/unstucktest/redistest"
)

func TestMain(m *testing.M) { pgtest.RunMain(m); redistest.Stop() }

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

	out, errOut, err = runConsole(t, nil, "migrate", "--help")
	require.NoError(t, err)
	require.Contains(t, out, "-db")
	require.Empty(t, errOut)
}

// TestHelpOnStdoutErrorsOnStderr checks every command and subcommand:
// --help prints on stdout and succeeds (exit 0), a bad flag prints the
// error and the usage on stderr only and is a usage error (exit 2) (issue
// 10 item 6).
func TestHelpOnStdoutErrorsOnStderr(t *testing.T) {
	t.Parallel()
	for _, cmd := range [][]string{
		{"serve"}, {"migrate"}, {"demo"}, {"user"}, {"user", "add"}, {"user", "disable"}, {"user", "enable"},
		{"audit"}, {"audit", "verify"},
	} {
		name := strings.Join(cmd, " ")
		for _, help := range []string{"--help", "-h"} {
			out, errOut, err := runConsole(t, nil, append(slices.Clone(cmd), help)...)
			require.NoError(t, err, "%s %s", name, help)
			require.Contains(t, out, "Usage:", "%s %s: help on stdout", name, help)
			require.Empty(t, errOut, "%s %s", name, help)
		}
		if len(cmd) == 1 && (cmd[0] == "user" || cmd[0] == "audit") {
			continue // they take a subcommand, not flags
		}
		out, errOut, err := runConsole(t, nil, append(slices.Clone(cmd), "--no-such-flag")...)
		require.ErrorIs(t, err, errUsage, name)
		require.Empty(t, out, name)
		require.Contains(t, errOut, "no-such-flag", name)
		require.Contains(t, errOut, "Usage:", name)
	}
	for _, cmd := range [][]string{{"user"}, {"user", "frobnicate", "--username", "x", "--db", "sqlite:x"}, {"audit"}} {
		out, errOut, err := runConsole(t, nil, cmd...)
		require.ErrorIs(t, err, errUsage, cmd)
		require.Empty(t, out, cmd)
		require.Contains(t, errOut, "Usage:", cmd)
	}
}

// TestDatabasePasswordNeverPrinted checks that the UNSTUCK_DB default that
// help and usage show has its password redacted, in the URL's user info
// and in a password parameter.
func TestDatabasePasswordNeverPrinted(t *testing.T) {
	t.Parallel()
	env := map[string]string{"UNSTUCK_DB": "postgres://ops:hunter2@db.internal:5432/unstuck?sslmode=require&password=hunter3"}
	for _, cmd := range [][]string{{"serve"}, {"migrate"}, {"user", "add"}, {"audit", "verify"}} {
		name := strings.Join(cmd, " ")
		out, _, err := runConsole(t, env, append(slices.Clone(cmd), "--help")...)
		require.NoError(t, err, name)
		require.Contains(t, out, "postgres://ops:xxxxx@db.internal:5432/unstuck", name)
		_, errOut, err := runConsole(t, env, append(slices.Clone(cmd), "--bogus")...)
		require.ErrorIs(t, err, errUsage, name)
		require.Contains(t, errOut, "ops:xxxxx@", name)
		for _, printed := range []string{out, errOut} {
			require.NotContains(t, printed, "hunter2", name)
			require.NotContains(t, printed, "hunter3", name)
		}
	}
	require.Equal(t, "sqlite:/var/lib/x.db", redactURL("sqlite:/var/lib/x.db"))
	require.Equal(t, "mysql://root:xxxxx@h:3306/db", redactURL("mysql://root:hunter2@h/db"))
	require.Equal(t, "oracle:…", redactURL("oracle://root:hunter2@h/db"))
	require.Equal(t, "postgres://h/db", redactURL("postgres://h/db"))
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
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	defer pool.Close()
	page, err := idempgx.New(pool).ListKeys(context.Background(), idemdriver.KeyFilter{})
	require.NoError(t, err, "the driver's table exists")
	require.Empty(t, page.Records)
}

func TestMigrateBadInput(t *testing.T) {
	t.Parallel()
	_, errOut, err := runConsole(t, nil, "migrate")
	require.ErrorIs(t, err, errUsage)
	require.Contains(t, errOut, "--db is required")

	_, _, err = runConsole(t, nil, "migrate", "--db", "oracle://user:hunter2@host/db")
	require.ErrorContains(t, err, "must start with postgres://")
	require.NotContains(t, err.Error(), "hunter2", "a password is never echoed")

	// MySQL is a store: an unreachable server is an
	// error naming the redacted URL.
	_, _, err = runConsole(t, nil, "migrate", "--db", "mysql://user:hunter2@127.0.0.1:1/db?timeout=2s")
	require.ErrorContains(t, err, "mysql://user:xxxxx@127.0.0.1:1/db")
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

	env := map[string]string{"UNSTUCK_DB": db, "UNSTUCK_SECRET": "serve-test-secret-0123456789abcdef", "UNSTUCK_AUDIT_KEY": testAuditKey}
	base, stop := startServe(t, env)
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
	require.Contains(t, string(metrics), "\nunstuck_clock_skew_seconds ", "serve exports the clock skew")
	stop()
}

// startServe runs "console serve --addr 127.0.0.1:0" with env until the
// returned stop, which requires it to have ended without an error, and
// returns the console's base URL once it listens.
func startServe(t *testing.T, env map[string]string) (base string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
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
	return base, func() {
		t.Helper()
		cancel()
		require.NoError(t, <-done)
	}
}

// fakeTerminal is a [terminal] that answers ReadPassword with its lines
// and records that nothing was read with echo.
type fakeTerminal struct {
	io.Reader // never read: a terminal's password is read without echo
	lines     []string
	asked     int
}

func (f *fakeTerminal) ReadPassword(context.Context) ([]byte, error) {
	if f.asked >= len(f.lines) {
		return nil, io.EOF
	}
	f.asked++
	return []byte(f.lines[f.asked-1]), nil
}

// TestUserAddPromptsAtATerminal checks that "user add" at a terminal asks
// for the password on stderr (twice, read without echo) instead of waiting
// silently, and never prints it (SPEC K5).
func TestUserAddPromptsAtATerminal(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "users.db")
	_, _, err := runConsole(t, nil, "migrate", "--db", db)
	require.NoError(t, err)
	env := func(string) string { return "" }
	add := func(user string, lines ...string) (tty *fakeTerminal, out, errOut string, err error) {
		var o, e bytes.Buffer
		tty = &fakeTerminal{Reader: strings.NewReader(""), lines: lines}
		err = runWithStdin(context.Background(), []string{"user", "add", "--db", db, "--username", user, "--role", "oncall"}, env, tty, &o, &e)
		return tty, o.String(), e.String(), err
	}

	tty, out, errOut, err := add("ada", "a-long-enough-password", "a-long-enough-password")
	require.NoError(t, err)
	require.Equal(t, 2, tty.asked)
	require.Contains(t, errOut, "Password for ada")
	require.Contains(t, errOut, "Repeat the password")
	require.Contains(t, out, "added user ada with role oncall")
	require.NotContains(t, out+errOut, "a-long-enough-password")

	_, out, _, err = add("bob", "a-long-enough-password", "another-long-password")
	require.ErrorContains(t, err, "differ")
	require.NotContains(t, out, "added")

	tty, _, _, err = add("cy", "short")
	require.ErrorContains(t, err, "at least 12")
	require.Equal(t, 1, tty.asked, "a refused password is not asked again")

	tty, out, _, err = add("dee", "")
	require.NoError(t, err)
	require.Equal(t, 1, tty.asked)
	require.Regexp(t, `generated password \(shown once\): \S{20}`, out)
}
