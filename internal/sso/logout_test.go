package sso_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/sso"
	"github.com/unstuckhq/unstuck/internal/sso/devidp"
)

// TestVerifyLogoutToken checks the logout token validation of OpenID
// Connect Back-Channel Logout 1.0 (section 2.6) against tokens the
// in-process provider signs, and forgeries of them.
func TestVerifyLogoutToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	token := func(o devidp.LogoutTokenOptions) string {
		t.Helper()
		raw, err := b.idp.LogoutToken("ada", o)
		require.NoError(t, err)
		return raw
	}
	edit := func(f func(map[string]any)) devidp.LogoutTokenOptions { return devidp.LogoutTokenOptions{Edit: f} }

	t.Run("valid, then replayed, then accepted again once forgotten", func(t *testing.T) {
		raw := token(devidp.LogoutTokenOptions{})
		lt, err := b.client.VerifyLogoutToken(t.Context(), raw)
		require.NoError(t, err)
		require.Equal(t, "u1", lt.Subject)
		require.NotEmpty(t, lt.ID)
		require.WithinDuration(t, time.Now(), lt.IssuedAt, time.Minute)
		_, err = b.client.VerifyLogoutToken(t.Context(), raw)
		require.ErrorIs(t, err, sso.ErrLogoutReplayed)
		b.client.ForgetLogoutToken(lt)
		_, err = b.client.VerifyLogoutToken(t.Context(), raw)
		require.NoError(t, err, "a logout that could not be carried out may be sent again")
	})
	t.Run("with a sid beside the sub", func(t *testing.T) {
		lt, err := b.client.VerifyLogoutToken(t.Context(), token(edit(func(c map[string]any) { c["sid"] = "op-session-1" })))
		require.NoError(t, err)
		require.Equal(t, "u1", lt.Subject)
		require.Equal(t, "op-session-1", lt.SessionID)
	})
	t.Run("no exp", func(t *testing.T) {
		_, err := b.client.VerifyLogoutToken(t.Context(), token(edit(func(c map[string]any) { delete(c, "exp") })))
		require.NoError(t, err, "exp is optional for some providers: iat bounds the age")
	})
	t.Run("a sid without a sub", func(t *testing.T) {
		_, err := b.client.VerifyLogoutToken(t.Context(), token(edit(func(c map[string]any) { delete(c, "sub"); c["sid"] = "op-session-1" })))
		require.ErrorIs(t, err, sso.ErrLogoutNoSubject)
	})

	now := time.Now()
	for name, o := range map[string]devidp.LogoutTokenOptions{
		"a key the provider does not publish": {UnknownKey: true},
		"another audience":                    edit(func(c map[string]any) { c["aud"] = "another-app" }),
		"another issuer":                      edit(func(c map[string]any) { c["iss"] = "https://evil.example.com" }),
		"a nonce":                             edit(func(c map[string]any) { c["nonce"] = "n-0S6_WzA2Mj" }),
		"no events claim":                     edit(func(c map[string]any) { delete(c, "events") }),
		"another event":                       edit(func(c map[string]any) { c["events"] = map[string]any{"urn:other": map[string]any{}} }),
		"an event that is no object":          edit(func(c map[string]any) { c["events"] = map[string]any{sso.BackChannelLogoutEvent: "yes"} }),
		"no jti":                              edit(func(c map[string]any) { delete(c, "jti") }),
		"no iat":                              edit(func(c map[string]any) { delete(c, "iat") }),
		"issued too long ago": edit(func(c map[string]any) {
			c["iat"] = now.Add(-sso.LogoutTokenMaxAge - time.Minute).Unix()
		}),
		"issued in the future": edit(func(c map[string]any) { c["iat"] = now.Add(sso.LogoutTokenSkew + time.Minute).Unix() }),
		"expired":              edit(func(c map[string]any) { c["exp"] = now.Add(-sso.LogoutTokenSkew - time.Minute).Unix() }),
		"neither sub nor sid":  edit(func(c map[string]any) { delete(c, "sub") }),
	} {
		t.Run(name, func(t *testing.T) {
			raw := token(o)
			_, err := b.client.VerifyLogoutToken(t.Context(), raw)
			require.ErrorIs(t, err, sso.ErrLogoutToken)
			require.NotContains(t, err.Error(), raw, "the error never holds the token")
			require.NotContains(t, err.Error(), strings.Split(raw, ".")[2], "nor its signature")
		})
	}
	t.Run("empty or not a JWT", func(t *testing.T) {
		for _, raw := range []string{"", "not-a-jwt", "a.b.c"} {
			_, err := b.client.VerifyLogoutToken(t.Context(), raw)
			require.ErrorIs(t, err, sso.ErrLogoutToken, "%q", raw)
		}
	})
	t.Run("provider down", func(t *testing.T) {
		b := setup(t)
		raw, err := b.idp.LogoutToken("ada", devidp.LogoutTokenOptions{})
		require.NoError(t, err)
		require.NoError(t, b.idp.Close())
		_, err = b.client.VerifyLogoutToken(t.Context(), raw)
		require.ErrorIs(t, err, sso.ErrUnavailable)
	})
}

func TestNewRefusesPlainHTTP(t *testing.T) {
	t.Parallel()
	ok := sso.Config{Issuer: "https://idp.example.com", ClientID: "c", ClientSecret: "s", RedirectURL: "https://console.example.com/login/sso/callback"}
	for _, remote := range []string{"http://idp.example.com", "http://10.0.0.1:8080", "http://0.0.0.0:8080", "http://localhost.example.com",
		"http://[::ffff:10.0.0.1]:80", "http://[2001:db8::1]"} {
		for _, field := range []string{"issuer", "redirect URL"} {
			c := ok
			if field == "issuer" {
				c.Issuer = remote
			} else {
				c.RedirectURL = remote + "/login/sso/callback"
			}
			_, err := sso.New(c)
			require.ErrorContains(t, err, "the "+field, "%s %s", field, remote)
			require.ErrorContains(t, err, "plain http", "%s %s", field, remote)
			require.ErrorContains(t, err, "use https://", "says what to change: %s %s", field, remote)
		}
	}
	for _, local := range []string{"http://127.0.0.1:5556", "http://127.3.2.1", "http://[::1]:8080", "http://localhost:8080", "http://LOCALHOST",
		"http://console.localhost", "http://[::ffff:127.0.0.1]:80", "https://idp.example.com"} {
		c := ok
		c.Issuer, c.RedirectURL = local, local+"/login/sso/callback"
		_, err := sso.New(c)
		require.NoError(t, err, local)
	}
}
