package consolecmd

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alexedwards/scs/v2"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/auth"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/unstucktest/mysqltest"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

// userCmd runs "console user …" with stdin as its standard input and env
// as its environment.
func userCmd(t *testing.T, env map[string]string, stdin string, args ...string) (stdout string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = runWithStdin(context.Background(), append([]string{"user"}, args...), func(k string) string { return env[k] },
		strings.NewReader(stdin), &out, &errOut)
	return out.String(), err
}

// A user added before "console migrate" on a server database says to run
// it, with the URL, instead of SQLSTATE 42P01 or MariaDB's error 1146.
func TestUserAddBeforeMigrateSaysRunMigrate(t *testing.T) {
	t.Parallel()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url := pgtest.Database(t)
		_, err := userCmd(t, nil, "a-long-enough-password\n", "add", "--db", url, "--username", "ada", "--role", "admin")
		require.ErrorContains(t, err, "run console migrate --db "+redactURL(url)+" first")
		require.True(t, strings.HasPrefix(err.Error(), "the database has no console tables yet"), err.Error())
	})
	t.Run("mysql", func(t *testing.T) {
		t.Parallel()
		cfg, err := mysql.ParseDSN(mysqltest.NewDatabase(t))
		require.NoError(t, err)
		url := "mysql://" + cfg.User + "@" + cfg.Addr + "/" + cfg.DBName
		_, err = userCmd(t, nil, "a-long-enough-password\n", "add", "--db", url, "--username", "ada", "--role", "admin")
		require.ErrorContains(t, err, "run console migrate --db "+redactURL(url)+" first")
	})
}

// Adding a user twice names the command that resets its password instead
// of SQLSTATE 23505 or SQLite's constraint error.
func TestUserAddTwiceSaysUserPassword(t *testing.T) {
	t.Parallel()
	for name, url := range map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "twice.db") },
		"postgres": func(t *testing.T) string { return pgtest.Database(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := url(t)
			_, _, err := runConsole(t, nil, "migrate", "--db", db)
			require.NoError(t, err)
			_, err = userCmd(t, nil, "a-long-enough-password\n", "add", "--db", db, "--username", "ada", "--role", "admin")
			require.NoError(t, err)
			_, err = userCmd(t, nil, "another-long-password\n", "add", "--db", db, "--username", "ada", "--role", "admin")
			require.EqualError(t, err, "add ada: user ada exists; use console user password --username ada to reset its password")
		})
	}
}

// An SQLite path in a directory that does not exist names the directory,
// not SQLite's "unable to open database file (14)" alone.
func TestSQLitePathInAMissingDirectory(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "no", "such")
	_, err := userCmd(t, nil, "", "add", "--db", "sqlite:"+filepath.Join(dir, "console.db"), "--username", "ada", "--role", "admin")
	require.ErrorContains(t, err, "the directory "+dir+" does not exist; create it (mkdir -p "+dir+")")
	_, _, err = runConsole(t, nil, "migrate", "--db", "sqlite:"+filepath.Join(dir, "console.db"))
	require.ErrorContains(t, err, "the directory "+dir+" does not exist")
}

// A missing or short UNSTUCK_SECRET says its length, that it is taken as
// raw bytes, and how to make one.
func TestShortSecretSaysItsLengthAndHowToMakeOne(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "secret.db")
	_, _, err := runConsole(t, map[string]string{"UNSTUCK_DB": db, "UNSTUCK_SECRET": "only-ten-b"}, "serve", "--addr", "127.0.0.1:0")
	require.EqualError(t, err, "UNSTUCK_SECRET has 10 bytes, at least 32 are needed; it is used as raw bytes, not decoded from base64 or hex; make one with: openssl rand -base64 48")
	require.Equal(t, 1, exitStatus(err))
	_, _, err = runConsole(t, map[string]string{"UNSTUCK_DB": db}, "serve", "--addr", "127.0.0.1:0")
	require.ErrorContains(t, err, "UNSTUCK_SECRET is not set: the application secret must have at least 32 bytes")
	require.ErrorContains(t, err, "openssl rand -base64 48")
}

// serve off loopback warns that its Secure cookies need https in front,
// and that --insecure-cookies there sends sessions in clear; on loopback
// it says nothing.
func TestServeWarnsAboutCookiesOffLoopback(t *testing.T) {
	t.Parallel()
	warned := func(addr net.Addr, insecure bool) string {
		var buf bytes.Buffer
		warnPlainHTTP(addr, insecure, slog.New(slog.NewJSONHandler(&buf, nil)))
		return buf.String()
	}
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	require.Empty(t, warned(loopback, false))
	require.Empty(t, warned(loopback, true))
	all := &net.TCPAddr{IP: net.IPv4zero, Port: 8080}
	got := warned(all, false)
	require.Contains(t, got, `"level":"WARN"`)
	require.Contains(t, got, "session cookies are Secure, so browsers sign in only over https")
	require.Contains(t, got, "--insecure-cookies is for loopback only")
	got = warned(all, true)
	require.Contains(t, got, "session cookies travel in clear to 0.0.0.0:8080")
}

// The exit status is 0 when done, 2 for a command line that cannot be
// used, 1 when the command failed, as docs/configuration.md says.
func TestExitStatus(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--help"}, 0},
		{[]string{"user", "--help"}, 0},
		{nil, 2},
		{[]string{"frobnicate"}, 2},
		{[]string{"migrate", "--no-such-flag"}, 2},
		{[]string{"migrate"}, 2}, // --db is required
		{[]string{"user", "add", "--db", "sqlite:" + filepath.Join(dir, "x.db"), "--username", "ada", "--role", "root"}, 2},
		{[]string{"migrate", "--db", "sqlite:" + filepath.Join(dir, "no", "x.db")}, 1},
		{[]string{"serve", "--db", "sqlite:" + filepath.Join(dir, "x.db")}, 1}, // no UNSTUCK_SECRET
		{[]string{"user", "disable", "--db", "sqlite:" + filepath.Join(dir, "x.db"), "--username", "nobody"}, 1},
	} {
		_, _, err := runConsole(t, nil, tc.args...)
		require.Equal(t, tc.want, exitStatus(err), "console %s: %v", strings.Join(tc.args, " "), err)
	}
}

// "console user password" resets a local account's password read like
// "user add" reads one, ends the account's sessions (not another's), and
// records user.password_reset in the audit trail; it needs the audit key,
// and refuses an unknown account with the command that adds one.
func TestUserPassword(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := "sqlite:" + filepath.Join(t.TempDir(), "password.db")
	env := map[string]string{"UNSTUCK_AUDIT_KEY": testAuditKey}
	_, _, err := runConsole(t, env, "migrate", "--db", db)
	require.NoError(t, err)
	_, err = userCmd(t, nil, "the-first-password\n", "add", "--db", db, "--username", "ada", "--role", "oncall")
	require.NoError(t, err)
	_, err = userCmd(t, nil, "bobs-own-password\n", "add", "--db", db, "--username", "bob", "--role", "support")
	require.NoError(t, err)

	d, err := openDatabase(ctx, db)
	require.NoError(t, err)
	defer d.Close()
	ada, _, err := d.Console.UserByUsername(ctx, "ada")
	require.NoError(t, err)
	bob, _, err := d.Console.UserByUsername(ctx, "bob")
	require.NoError(t, err)
	sm := scs.New()
	sm.Store = d.Console.SessionStore()
	session := func(id int64) string {
		sctx, err := sm.Load(ctx, "")
		require.NoError(t, err)
		sm.Put(sctx, store.SessionUserKey, id)
		token, _, err := sm.Commit(sctx)
		require.NoError(t, err)
		return token
	}
	adaPhone, adaDesk, bobDesk := session(ada.ID), session(ada.ID), session(bob.ID)

	_, err = userCmd(t, nil, "a-new-long-password\n", "password", "--db", db, "--username", "ada")
	require.ErrorContains(t, err, "UNSTUCK_AUDIT_KEY must be set", "audited, so the key is needed")
	_, err = userCmd(t, env, "a-new-long-password\n", "password", "--db", db, "--username", "nobody")
	require.EqualError(t, err, "no user nobody; add it with console user add --username nobody --role ROLE")
	_, err = userCmd(t, env, "short\n", "password", "--db", db, "--username", "ada")
	require.ErrorContains(t, err, "at least 12")

	out, err := userCmd(t, env, "a-new-long-password\n", "password", "--db", db, "--username", "ada")
	require.NoError(t, err)
	require.Equal(t, "reset the password of user ada; ended 2 sessions\n", out)
	require.NotContains(t, out, "a-new-long-password", "a given password is never printed")
	after, _, err := d.Console.UserByUsername(ctx, "ada")
	require.NoError(t, err)
	require.NoError(t, auth.Verify(after.PasswordHash, "a-new-long-password"), "the new password signs in")
	require.Error(t, auth.Verify(after.PasswordHash, "the-first-password"), "the old one does not")
	for token, want := range map[string]bool{adaPhone: false, adaDesk: false, bobDesk: true} {
		_, found, err := d.Console.SessionStore().Find(token)
		require.NoError(t, err)
		require.Equal(t, want, found, "ada's sessions ended, bob's kept")
	}

	keys, err := audit.NewKeyring([]byte(testAuditKey))
	require.NoError(t, err)
	d.useAuditKeys(keys)
	entries, _, err := d.Trail.List(ctx, audit.Filter{Action: "user.password_reset"})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	e := entries[0]
	require.Equal(t, passwordResetActor, e.Actor)
	require.Equal(t, "user", e.TargetKind)
	require.Equal(t, "ada", e.TargetID)
	require.Equal(t, audit.OutcomeApplied, e.Outcome)
	var state struct {
		SessionsEnded int64 `json:"sessions_ended"`
	}
	require.NoError(t, json.Unmarshal(e.After, &state))
	require.EqualValues(t, 2, state.SessionsEnded)
	require.NotContains(t, string(e.After)+e.Reason, "a-new-long-password")

	// An empty input generates one, printed once.
	out, err = userCmd(t, env, "", "password", "--db", db, "--username", "bob")
	require.NoError(t, err)
	require.Regexp(t, `^reset the password of user bob; ended 1 sessions\ngenerated password \(shown once\): \S{20}`, out)
}
