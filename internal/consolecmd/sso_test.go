package consolecmd

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/web"
)

func TestServeSSOFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	roles := filepath.Join(dir, "roles.csv")
	require.NoError(t, os.WriteFile(roles, []byte("group,role\nops,admin\n"), 0o600))
	env := func(kv ...string) func(string) string {
		m := map[string]string{"UNSTUCK_DB": "sqlite:" + filepath.Join(dir, "x.db")}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	sso := []string{"serve", "--oidc-issuer", "https://idp.example.com", "--oidc-client-id", "console",
		"--oidc-redirect-url", "https://console.example.com/login/sso/callback", "--oidc-roles", roles}
	for _, c := range []struct {
		name string
		args []string
		env  func(string) string
		want string
	}{
		{"secret as a flag", slices.Concat(sso, []string{"--oidc-client-secret", "s3cret"}), env(), "never a flag"},
		{"secret as a flag with =", slices.Concat(sso, []string{"-oidc-client-secret=s3cret"}), env(), "never a flag"},
		{"no secret", sso, env(), "needs the client secret"},
		{"both secrets", sso, env("UNSTUCK_OIDC_CLIENT_SECRET", "a", "UNSTUCK_OIDC_CLIENT_SECRET_FILE", roles), "not both"},
		{"no local sign-in without sso", []string{"serve", "--no-local-sign-in"}, env(), "needs single sign-on"},
		{"client ID without issuer", []string{"serve", "--oidc-client-id", "x"}, env(), "--oidc-issuer is not"},
		{"bad mapping", slices.Concat(sso[:len(sso)-1:len(sso)-1], []string{os.DevNull}), env("UNSTUCK_OIDC_CLIENT_SECRET", "s"), "maps no group"},
		{"back-channel logout without issuer", []string{"serve", "--oidc-backchannel-logout"}, env(), "--oidc-backchannel-logout is set but --oidc-issuer is not"},
		{"plain http issuer", slices.Concat(sso, []string{"--oidc-issuer", "http://idp.example.com"}), env("UNSTUCK_OIDC_CLIENT_SECRET", "s"),
			`--oidc-issuer "http://idp.example.com" uses plain http on idp.example.com, which is not loopback: use https://idp.example.com`},
		{"plain http redirect URL", slices.Concat(sso, []string{"--oidc-redirect-url", "http://console.example.com/login/sso/callback"}), env("UNSTUCK_OIDC_CLIENT_SECRET", "s"),
			"--oidc-redirect-url \"http://console.example.com/login/sso/callback\" uses plain http on console.example.com, which is not loopback: use https://console.example.com/login/sso/callback"},
		{"plain http from the environment", sso[:1], env("UNSTUCK_OIDC_ISSUER", "http://10.0.0.5:8080", "UNSTUCK_OIDC_CLIENT_ID", "c",
			"UNSTUCK_OIDC_REDIRECT_URL", "https://console.example.com/login/sso/callback", "UNSTUCK_OIDC_CLIENT_SECRET", "s"), "--oidc-issuer \"http://10.0.0.5:8080\" uses plain http"},
		{"reauth over an hour without back-channel logout", slices.Concat(sso, []string{"--oidc-reauth", "2h"}), env("UNSTUCK_OIDC_CLIENT_SECRET", "s"),
			"--oidc-reauth 2h is longer than 1h without back-channel logout: a user the provider removed would keep their access that long; set --oidc-reauth 1h or less, or turn on --oidc-backchannel-logout and register https://console.example.com/oidc/backchannel-logout at the provider"},
		{"reauth over an hour from the environment", sso, env("UNSTUCK_OIDC_CLIENT_SECRET", "s", "UNSTUCK_OIDC_REAUTH", "90m"), "--oidc-reauth 1h30m is longer than 1h"},
		{"reauth not a duration", sso, env("UNSTUCK_OIDC_CLIENT_SECRET", "s", "UNSTUCK_OIDC_REAUTH", "1 hour"), `UNSTUCK_OIDC_REAUTH "1 hour" is not a duration`},
		{"negative reauth", slices.Concat(sso, []string{"--oidc-reauth", "-1m"}), env("UNSTUCK_OIDC_CLIENT_SECRET", "s"), "--oidc-reauth must be positive"},
	} {
		var stderr bytes.Buffer
		err := run(t.Context(), c.args, c.env, io.Discard, &stderr)
		require.ErrorIs(t, err, errUsage, c.name)
		require.Contains(t, stderr.String(), c.want, c.name)
	}
	// A secret from a file passes the single sign-on checks (and serve
	// goes on to want UNSTUCK_SECRET).
	secretFile := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(secretFile, []byte("s3cret\n"), 0o600))
	err := run(t.Context(), sso, env("UNSTUCK_OIDC_CLIENT_SECRET_FILE", secretFile), io.Discard, io.Discard)
	require.ErrorContains(t, err, "UNSTUCK_SECRET")
	// So do plain http on loopback, and a long re-authentication with
	// back-channel logout.
	for name, args := range map[string][]string{
		"loopback http":                        slices.Concat(sso, []string{"--oidc-issuer", "http://127.0.0.1:5556", "--oidc-redirect-url", "http://localhost:8080/login/sso/callback"}),
		"ipv6 loopback":                        slices.Concat(sso, []string{"--oidc-issuer", "http://[::1]:5556/realms/x"}),
		"long reauth with back-channel logout": slices.Concat(sso, []string{"--oidc-reauth", "8h", "--oidc-backchannel-logout"}),
	} {
		err := run(t.Context(), args, env("UNSTUCK_OIDC_CLIENT_SECRET", "s"), io.Discard, io.Discard)
		require.ErrorContains(t, err, "UNSTUCK_SECRET", name)
	}
}

// TestSSOFlagsBuild: what the flags make of single sign-on: back-channel
// logout off by default, the re-authentication left to the console's
// default (15m, or 1h with back-channel logout) unless set.
func TestSSOFlagsBuild(t *testing.T) {
	t.Parallel()
	roles := filepath.Join(t.TempDir(), "roles.csv")
	require.NoError(t, os.WriteFile(roles, []byte("group,role\nops,admin\n"), 0o600))
	build := func(env map[string]string, args ...string) (*web.SSO, error) {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		getenv := func(k string) string { return env[k] }
		f := defineSSOFlags(fs, getenv)
		require.NoError(t, fs.Parse(slices.Concat([]string{"--oidc-issuer", "https://idp.example.com", "--oidc-client-id", "console",
			"--oidc-redirect-url", "https://console.example.com/login/sso/callback", "--oidc-roles", roles}, args)))
		return f.build(getenv, os.ReadFile)
	}
	secret := map[string]string{"UNSTUCK_OIDC_CLIENT_SECRET": "s"}
	s, err := build(secret)
	require.NoError(t, err)
	require.False(t, s.BackChannelLogout)
	require.Zero(t, s.ReauthAfter, "the console's default: web.DefaultSSOReauth")
	require.Equal(t, 15*time.Minute, web.DefaultSSOReauth)

	s, err = build(map[string]string{"UNSTUCK_OIDC_CLIENT_SECRET": "s", "UNSTUCK_OIDC_BACKCHANNEL_LOGOUT": "true"})
	require.NoError(t, err)
	require.True(t, s.BackChannelLogout, "from the environment")
	require.Equal(t, time.Hour, web.DefaultSSOReauthBackChannel)

	s, err = build(secret, "--oidc-reauth", "45m")
	require.NoError(t, err)
	require.Equal(t, 45*time.Minute, s.ReauthAfter)
	s, err = build(secret, "--oidc-reauth", "1h")
	require.NoError(t, err, "an hour is still allowed without back-channel logout")
	require.Equal(t, time.Hour, s.ReauthAfter)
	require.Equal(t, "https://console.example.com/oidc/backchannel-logout", backChannelURL("https://console.example.com/login/sso/callback"))
}

// TestDemoSSOOnLoopbackOnly: the demo's provider speaks plain http, so
// "--oidc-demo" refuses a console listening beyond loopback, saying how to
// run it.
func TestDemoSSOOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "sso.db")
	err := run(t.Context(), []string{"demo", "--oidc-demo", "--addr", "0.0.0.0:0", "--db", db, "--traffic=false"}, func(string) string { return "" }, io.Discard, io.Discard)
	require.ErrorContains(t, err, "--oidc-demo speaks plain http, which single sign-on accepts on loopback only: run the demo with --addr 127.0.0.1:PORT")
}
