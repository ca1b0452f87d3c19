package sso_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/sso"
	"github.com/unstuckhq/unstuck/internal/sso/devidp"
)

const redirect = "http://console.localhost/login/sso/callback"

type testBundle struct {
	idp    *devidp.Provider
	client *sso.Client
}

func setup(t *testing.T) testBundle {
	t.Helper()
	idp, err := devidp.Start("127.0.0.1:0", devidp.Config{ClientID: "console", ClientSecret: "s3cret", RedirectURIs: []string{redirect},
		Users: []devidp.User{
			{Subject: "u1", Username: "ada", Password: "pw", Name: "Ada Lovelace", Email: "ada@example.com", Groups: []string{"ops", "eng"}},
		}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = idp.Close() })
	c, err := sso.New(sso.Config{Issuer: idp.Issuer(), ClientID: "console", ClientSecret: "s3cret", RedirectURL: redirect})
	require.NoError(t, err)
	return testBundle{idp: idp, client: c}
}

// authorize plays the browser at the provider: it follows authURL to the
// login page, signs in, and returns the callback's query.
func authorize(t *testing.T, authURL, username, password string) url.Values {
	t.Helper()
	var callback *url.URL
	hc := &http.Client{CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), redirect) {
			callback = r.URL
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := hc.Get(authURL)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "login page status")
	id := resp.Request.URL.Query().Get("authRequestID")
	require.NotEmpty(t, id, "auth request id in %s", resp.Request.URL)
	loginURL := *resp.Request.URL
	loginURL.RawQuery = ""
	resp, err = hc.PostForm(loginURL.String(), url.Values{"authRequestID": {id}, "username": {username}, "password": {password}})
	require.NoError(t, err)
	resp.Body.Close()
	require.NotNil(t, callback, "redirected to the callback (status %d)", resp.StatusCode)
	return callback.Query()
}

func TestFinish(t *testing.T) {
	t.Parallel()

	t.Run("happy path: PKCE, state and nonce, groups", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u, p, err := b.client.Begin(t.Context())
		require.NoError(t, err)
		q, _ := url.Parse(u)
		require.Equal(t, "S256", q.Query().Get("code_challenge_method"))
		require.Equal(t, p.State, q.Query().Get("state"))
		require.Equal(t, p.Nonce, q.Query().Get("nonce"))
		id, err := b.client.Finish(t.Context(), p, authorize(t, u, "ada", "pw"))
		require.NoError(t, err)
		require.Equal(t, sso.Identity{Subject: "u1", Email: "ada@example.com", EmailVerified: true, Name: "Ada Lovelace", PreferredUsername: "ada",
			Groups: []string{"ops", "eng"}}, id)
	})
	t.Run("wrong state", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u, p, err := b.client.Begin(t.Context())
		require.NoError(t, err)
		cb := authorize(t, u, "ada", "pw")
		cb.Set("state", "forged")
		_, err = b.client.Finish(t.Context(), p, cb)
		require.ErrorIs(t, err, sso.ErrState)
		_, err = b.client.Finish(t.Context(), sso.Pending{}, cb) // none pending
		require.ErrorIs(t, err, sso.ErrState)
	})
	t.Run("replayed code", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u, p, err := b.client.Begin(t.Context())
		require.NoError(t, err)
		cb := authorize(t, u, "ada", "pw")
		_, err = b.client.Finish(t.Context(), p, cb)
		require.NoError(t, err)
		_, err = b.client.Finish(t.Context(), p, cb)
		require.ErrorIs(t, err, sso.ErrCode)
	})
	t.Run("code with another sign-in's verifier", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u, p, err := b.client.Begin(t.Context())
		require.NoError(t, err)
		cb := authorize(t, u, "ada", "pw")
		_, p2, err := b.client.Begin(t.Context())
		require.NoError(t, err)
		p2.State = p.State
		_, err = b.client.Finish(t.Context(), p2, cb)
		require.ErrorIs(t, err, sso.ErrCode)
	})
	t.Run("expired ID token", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.idp.SetIDTokenLifetime(-time.Minute)
		u, p, err := b.client.Begin(t.Context())
		require.NoError(t, err)
		_, err = b.client.Finish(t.Context(), p, authorize(t, u, "ada", "pw"))
		require.ErrorIs(t, err, sso.ErrIDToken)
		require.ErrorContains(t, err, "expired")
	})
	t.Run("wrong audience", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.idp.SetAudience([]string{"another-app"})
		u, p, err := b.client.Begin(t.Context())
		require.NoError(t, err)
		_, err = b.client.Finish(t.Context(), p, authorize(t, u, "ada", "pw"))
		require.ErrorIs(t, err, sso.ErrIDToken)
		require.ErrorContains(t, err, "audience")
	})
	t.Run("wrong nonce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u, p, err := b.client.Begin(t.Context())
		require.NoError(t, err)
		p.Nonce = "another"
		_, err = b.client.Finish(t.Context(), p, authorize(t, u, "ada", "pw"))
		require.ErrorIs(t, err, sso.ErrIDToken)
		require.ErrorContains(t, err, "nonce")
	})
	t.Run("provider error in the callback", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, p, err := b.client.Begin(t.Context())
		require.NoError(t, err)
		_, err = b.client.Finish(t.Context(), p, url.Values{"state": {p.State}, "error": {"access_denied"}})
		require.ErrorIs(t, err, sso.ErrDenied)
	})
	t.Run("provider down", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		issuer := b.idp.Issuer()
		require.NoError(t, b.idp.Close())
		c, err := sso.New(sso.Config{Issuer: issuer, ClientID: "console", ClientSecret: "s3cret", RedirectURL: redirect})
		require.NoError(t, err, "built without the network")
		_, _, err = c.Begin(t.Context())
		require.ErrorIs(t, err, sso.ErrUnavailable)
	})
	t.Run("end session URL", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u, ok := b.client.EndSessionURL(t.Context(), "http://console.localhost/login")
		require.True(t, ok, "discovered on demand")
		require.Contains(t, u, b.idp.Issuer()+"/end_session?")
		require.Contains(t, u, "client_id=console")
		require.Contains(t, u, "post_logout_redirect_uri=http%3A%2F%2Fconsole.localhost%2Flogin")
		require.NoError(t, b.idp.Close())
		c, err := sso.New(sso.Config{Issuer: b.idp.Issuer(), ClientID: "console", ClientSecret: "s3cret", RedirectURL: redirect})
		require.NoError(t, err)
		_, ok = c.EndSessionURL(t.Context(), "")
		require.False(t, ok, "provider down: no link")
	})
}

func TestNewRefusesIncompleteConfig(t *testing.T) {
	t.Parallel()
	ok := sso.Config{Issuer: "https://idp.example.com", ClientID: "c", ClientSecret: "s", RedirectURL: "https://console.example.com/login/sso/callback"}
	for name, mod := range map[string]func(*sso.Config){
		"issuer":        func(c *sso.Config) { c.Issuer = "" },
		"client ID":     func(c *sso.Config) { c.ClientID = "" },
		"client secret": func(c *sso.Config) { c.ClientSecret = "" },
		"redirect URL":  func(c *sso.Config) { c.RedirectURL = "ftp://x" },
	} {
		c := ok
		mod(&c)
		_, err := sso.New(c)
		require.ErrorContains(t, err, name, name)
	}
	_, err := sso.New(ok)
	require.NoError(t, err)
}

func TestRoleMap(t *testing.T) {
	t.Parallel()
	m, err := sso.ParseRoleMap(strings.NewReader("group,role\n# comment\nops-readers,auditor\nsupport,support\noncall,oncall\nplatform-admins, admin\n"))
	require.NoError(t, err)
	require.Equal(t, 4, m.Len())
	for _, c := range []struct {
		groups []string
		want   string
	}{
		{[]string{"support"}, "support"},
		{[]string{"support", "platform-admins", "ops-readers"}, "admin"},
		{[]string{"oncall", "ops-readers"}, "oncall"},
		{[]string{"unknown"}, ""},
		{[]string{"Support"}, ""}, // case matters
		{nil, ""},
	} {
		got, ok := m.Role(c.groups)
		require.Equal(t, c.want, got, "Role(%q)", c.groups)
		require.Equal(t, c.want != "", ok)
	}
	for _, bad := range []string{"a,root\n", "a\n", ",admin\n", "a,admin\na,support\n", "a,admin,x\n"} {
		_, err := sso.ParseRoleMap(strings.NewReader(bad))
		require.ErrorContains(t, err, "line", "%q", bad)
	}
}
