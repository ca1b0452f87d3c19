package web_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/sso"
	"github.com/unstuckhq/unstuck/internal/sso/devidp"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
)

// The console's callback as registered at the provider: the provider only
// redirects the browser there, so ssoBrowser maps this origin to the test
// server's.
const ssoConsole = "http://console.localhost"

const ssoRoles = `group,role
# the four roles, and a group that maps to two of them
auditors,auditor
support-team,support
oncall-team,oncall
platform-admins,admin
`

var ssoUsers = []devidp.User{
	{Subject: "sub-auditor", Username: "alice", Password: "pw-alice", Name: "Alice Auditor", Email: "alice@example.com", Groups: []string{"auditors"}},
	{Subject: "sub-support", Username: "sam", Password: "pw-sam", Name: "Sam Support", Email: "sam@example.com", Groups: []string{"support-team", "everyone"}},
	{Subject: "sub-oncall", Username: "olga", Password: "pw-olga", Name: "Olga Oncall", Email: "olga@example.com", Groups: []string{"oncall-team", "auditors"}},
	{Subject: "sub-admin", Username: "adam", Password: "pw-adam", Name: "Adam Admin", Email: "adam@example.com", Groups: []string{"support-team", "platform-admins"}},
	{Subject: "sub-nobody", Username: "nina", Password: "pw-nina", Name: "Nina", Email: "nina@example.com", Groups: []string{"marketing"}},
}

type ssoBundle struct {
	*bundle
	idp *devidp.Provider
}

// setupSSO starts a provider and the console with single sign-on; opts
// adjust the console's configuration after.
func setupSSO(t *testing.T, opts ...func(*web.Config)) ssoBundle {
	t.Helper()
	idp, err := devidp.Start("127.0.0.1:0", devidp.Config{ClientID: "unstuck-console", ClientSecret: "console-secret",
		RedirectURIs: []string{ssoConsole + "/login/sso/callback"}, PostLogoutRedirectURIs: []string{ssoConsole + "/login"}, Users: ssoUsers})
	require.NoError(t, err)
	t.Cleanup(func() { _ = idp.Close() })
	client, err := sso.New(sso.Config{Issuer: idp.Issuer(), ClientID: "unstuck-console", ClientSecret: "console-secret",
		RedirectURL: ssoConsole + "/login/sso/callback"})
	require.NoError(t, err)
	roles, err := sso.ParseRoleMap(strings.NewReader(ssoRoles))
	require.NoError(t, err)
	b := setup(t, append([]func(*web.Config){func(c *web.Config) {
		c.SSO = &web.SSO{Client: client, Roles: roles, Label: "Sign in with Demo IdP", PostLogoutURL: ssoConsole + "/login"}
	}}, opts...)...)
	return ssoBundle{bundle: b, idp: idp}
}

// ssoBrowser is a browser: one cookie jar, redirects followed, the
// console's registered origin mapped to the test server.
func (b ssoBundle) browser(t *testing.T) *http.Client {
	t.Helper()
	c := client(t)
	c.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if len(via) > 10 {
			return http.ErrUseLastResponse
		}
		if strings.HasPrefix(r.URL.String(), ssoConsole) {
			u, _ := url.Parse(b.srv.URL)
			r.URL.Scheme, r.URL.Host, r.Host = u.Scheme, u.Host, u.Host
		}
		if r.URL.Path == "/" && strings.HasPrefix(r.URL.String(), b.srv.URL) {
			return http.ErrUseLastResponse // signed in: stop at the console's redirect to the overview
		}
		return nil
	}
	return c
}

// ssoSignIn starts a sign-in at the console with c, signs in at the
// provider's login page, and returns the console's last answer.
func (b ssoBundle) ssoSignIn(t *testing.T, c *http.Client, username, pw string) (*http.Response, string) {
	t.Helper()
	loginURL, id := b.startAtProvider(t, c)
	return do(t, c, http.MethodPost, loginURL, url.Values{"authRequestID": {id}, "username": {username}, "password": {pw}})
}

// startAtProvider follows the console's /login/sso to the provider's
// login page and returns its form's URL and auth request id.
func (b ssoBundle) startAtProvider(t *testing.T, c *http.Client) (string, string) {
	t.Helper()
	resp, body := do(t, c, http.MethodGet, b.srv.URL+"/login/sso", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the provider's login page: %s", body)
	require.True(t, strings.HasPrefix(resp.Request.URL.String(), b.idp.Issuer()), "at the provider: %s", resp.Request.URL)
	id := resp.Request.URL.Query().Get("authRequestID")
	require.NotEmpty(t, id)
	return b.idp.Issuer() + "/login", id
}

// callbackOf signs in at the provider without following its redirect to
// the console, and returns the callback URL (on the test server).
func (b ssoBundle) callbackOf(t *testing.T, c *http.Client, username, pw string) string {
	t.Helper()
	loginURL, id := b.startAtProvider(t, c)
	stop := client(t) // no redirects, no cookies: the provider keeps none
	resp, _ := do(t, stop, http.MethodPost, loginURL, url.Values{"authRequestID": {id}, "username": {username}, "password": {pw}})
	require.Equal(t, http.StatusFound, resp.StatusCode)
	for range 5 { // the provider's own redirects, to its callback and then the console's
		loc, err := resp.Location()
		require.NoError(t, err)
		if strings.HasPrefix(loc.String(), ssoConsole) {
			return b.srv.URL + strings.TrimPrefix(loc.String(), ssoConsole)
		}
		resp, _ = do(t, stop, http.MethodGet, loc.String(), nil)
	}
	t.Fatal("no redirect to the console")
	return ""
}

// get GETs path on the console with c's cookies, without following
// redirects.
func (b ssoBundle) get(t *testing.T, c *http.Client, path string) (*http.Response, string) {
	t.Helper()
	stop := client(t)
	stop.Jar = c.Jar
	return do(t, stop, http.MethodGet, b.srv.URL+path, nil)
}

func ssoEntries(t *testing.T, b ssoBundle, action, outcome string) []audit.Entry {
	t.Helper()
	es, _, err := b.trail.List(context.Background(), audit.Filter{Action: action, Outcome: outcome})
	require.NoError(t, err)
	return es
}

func TestSSOSignInPerRole(t *testing.T) {
	t.Parallel()
	b := setupSSO(t)
	for _, c := range []struct{ username, pw, role string }{
		{"alice", "pw-alice", store.RoleAuditor},
		{"sam", "pw-sam", store.RoleSupport},
		{"olga", "pw-olga", store.RoleOncall}, // in auditors too: the highest role wins
		{"adam", "pw-adam", store.RoleAdmin},
	} {
		t.Run(c.role, func(t *testing.T) {
			br := b.browser(t)
			resp, body := b.ssoSignIn(t, br, c.username, c.pw)
			require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
			require.Equal(t, "/", resp.Header.Get("Location"))
			resp, body = do(t, br, http.MethodGet, b.srv.URL+"/", nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Contains(t, body, c.username)
			require.Contains(t, body, c.role)

			u, ok, err := b.db.UserByUsername(t.Context(), c.username)
			require.NoError(t, err)
			require.True(t, ok, "user created just in time")
			require.Equal(t, store.SourceOIDC, u.Source)
			require.Equal(t, c.role, u.Role)
			require.Equal(t, "sub-"+c.role, u.Subject)
			require.NotEmpty(t, u.Email)
			require.NotEmpty(t, u.DisplayName)
		})
	}
	signIns := ssoEntries(t, b, "user.sign_in", audit.OutcomeApplied)
	require.Len(t, signIns, 4)
	for _, e := range signIns {
		require.Contains(t, string(e.After), `"subject":"sub-`+e.Role+`"`, "the provider's subject is in the audit entry")
		require.NotContains(t, strings.ToLower(string(e.After)), "token")
	}
	// The users page (admins) lists them beside the local accounts.
	admin := signIn(t, b.bundle, store.RoleAdmin)
	_, body := do(t, admin, http.MethodGet, b.srv.URL+"/users", nil)
	require.Contains(t, body, "olga")
}

func TestSSORefusals(t *testing.T) {
	t.Parallel()

	t.Run("unknown group: no access, audited denied, no user", func(t *testing.T) {
		t.Parallel()
		b := setupSSO(t)
		resp, body := b.ssoSignIn(t, b.browser(t), "nina", "pw-nina")
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
		require.Contains(t, body, "No access to this console")
		require.Contains(t, body, "none of the groups")
		_, ok, err := b.db.UserBySubject(t.Context(), "sub-nobody")
		require.NoError(t, err)
		require.False(t, ok, "no user for a refused sign-in")
		denied := ssoEntries(t, b, "user.sign_in", audit.OutcomeDenied)
		require.Len(t, denied, 1)
		require.Equal(t, "oidc:sub-nobody", denied[0].Actor)
		require.Contains(t, string(denied[0].Before), `"groups":["marketing"]`)
	})
	t.Run("wrong state, replayed callback, replayed code", func(t *testing.T) {
		t.Parallel()
		b := setupSSO(t)
		br := b.browser(t)
		cb := b.callbackOf(t, br, "sam", "pw-sam")
		forged := strings.Replace(cb, "state=", "state=x", 1)
		resp, body := do(t, br, http.MethodGet, forged, nil)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
		require.Contains(t, body, "Sign-in not recognised")
		// The forged callback used the pending state up: the true one is
		// refused too.
		resp, _ = do(t, br, http.MethodGet, cb, nil)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)

		cb = b.callbackOf(t, br, "sam", "pw-sam")
		resp, body = do(t, br, http.MethodGet, cb, nil)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the genuine callback signs in: %s %s", cb, body)
		resp, _ = do(t, br, http.MethodGet, cb, nil)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "a replayed callback finds no pending sign-in")
		resp, _ = b.get(t, br, "/")
		require.Equal(t, http.StatusOK, resp.StatusCode, "the session it was replayed in stays")

		// Replay the code under a fresh state of another browser.
		other := b.browser(t)
		fresh := b.callbackOf(t, other, "sam", "pw-sam")
		fq, err := url.Parse(fresh)
		require.NoError(t, err)
		oq, err := url.Parse(cb)
		require.NoError(t, err)
		q := fq.Query()
		q.Set("code", oq.Query().Get("code"))
		fq.RawQuery = q.Encode()
		resp, body = do(t, other, http.MethodGet, fq.String(), nil)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, body)
		require.Contains(t, body, "Sign-in failed")
		resp, _ = b.get(t, other, "/")
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "not signed in")
	})
	t.Run("expired ID token", func(t *testing.T) {
		t.Parallel()
		b := setupSSO(t)
		b.idp.SetIDTokenLifetime(-time.Minute)
		br := b.browser(t)
		resp, body := b.ssoSignIn(t, br, "sam", "pw-sam")
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, body)
		resp, _ = b.get(t, br, "/")
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "not signed in")
	})
	t.Run("wrong audience", func(t *testing.T) {
		t.Parallel()
		b := setupSSO(t)
		b.idp.SetAudience([]string{"another-app"})
		br := b.browser(t)
		resp, body := b.ssoSignIn(t, br, "sam", "pw-sam")
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, body)
		resp, _ = b.get(t, br, "/")
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "not signed in")
	})
	t.Run("provider down: a clear page, local sign-in still works", func(t *testing.T) {
		t.Parallel()
		b := setupSSO(t)
		require.NoError(t, b.idp.Close())
		resp, body := do(t, b.browser(t), http.MethodGet, b.srv.URL+"/login/sso", nil)
		require.Equal(t, http.StatusBadGateway, resp.StatusCode)
		require.Contains(t, body, "Identity provider unavailable")
		require.Contains(t, body, `href="/login"`, "offers the local sign-in")
		c := signIn(t, b.bundle, store.RoleOncall)
		resp, _ = do(t, c, http.MethodGet, b.srv.URL+"/", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	})
	t.Run("an oidc user has no local password", func(t *testing.T) {
		t.Parallel()
		b := setupSSO(t)
		resp, _ := b.ssoSignIn(t, b.browser(t), "sam", "pw-sam")
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		resp, _ = do(t, client(t), http.MethodPost, b.srv.URL+"/login", url.Values{"username": {"sam"}, "password": {store.NoPassword}})
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	})
}

func TestSSOGroupChanges(t *testing.T) {
	t.Parallel()
	b := setupSSO(t)
	first := b.browser(t)
	resp, _ := b.ssoSignIn(t, first, "olga", "pw-olga")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	// Moved to support: the next sign-in gives the new role, audited.
	b.idp.SetGroups("olga", []string{"support-team"})
	second := b.browser(t)
	resp, _ = b.ssoSignIn(t, second, "olga", "pw-olga")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	u, _, err := b.db.UserBySubject(t.Context(), "sub-oncall")
	require.NoError(t, err)
	require.Equal(t, store.RoleSupport, u.Role)
	changes := ssoEntries(t, b, "user.role_change", audit.OutcomeApplied)
	require.Len(t, changes, 1)
	require.Contains(t, string(changes[0].Before), `"role":"oncall"`)
	require.Contains(t, string(changes[0].After), `"role":"support"`)
	_, body := do(t, first, http.MethodGet, b.srv.URL+"/", nil)
	require.Contains(t, body, store.RoleSupport, "the older session has the new role at once")

	// Removed from every mapped group: refused at the next sign-in, and
	// the sessions the user still has end.
	b.idp.SetGroups("olga", []string{"former-staff"})
	resp, body = b.ssoSignIn(t, b.browser(t), "olga", "pw-olga")
	require.Equal(t, http.StatusForbidden, resp.StatusCode, body)
	for _, c := range []*http.Client{first, second} {
		resp, _ = b.get(t, c, "/")
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "session ended")
		require.Equal(t, "/login", resp.Header.Get("Location"))
	}
	denied := ssoEntries(t, b, "user.sign_in", audit.OutcomeDenied)
	require.Len(t, denied, 1)
	require.Equal(t, u.Username, denied[0].Actor)
}

func TestSSODisabledUser(t *testing.T) {
	t.Parallel()
	b := setupSSO(t)
	br := b.browser(t)
	resp, _ := b.ssoSignIn(t, br, "sam", "pw-sam")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.NoError(t, b.db.SetUserDisabled(t.Context(), "sam", true))
	resp, _ = b.get(t, br, "/")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the session ends at once")
	resp, body := b.ssoSignIn(t, b.browser(t), "sam", "pw-sam")
	require.Equal(t, http.StatusForbidden, resp.StatusCode, body)
	require.Contains(t, body, "disabled")
	u, _, err := b.db.UserBySubject(t.Context(), "sub-support")
	require.NoError(t, err)
	require.True(t, u.Disabled, "a sign-in does not enable the user again")
}

func TestSSOReauth(t *testing.T) {
	t.Parallel()
	b := setupSSO(t, func(c *web.Config) { c.SSO.ReauthAfter = time.Nanosecond })
	br := b.browser(t)
	resp, _ := b.ssoSignIn(t, br, "sam", "pw-sam")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, _ = b.get(t, br, "/keys")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/login/sso", resp.Header.Get("Location"), "sent through the provider again")
}

func TestSSOLoginPageAndLocalOff(t *testing.T) {
	t.Parallel()

	t.Run("both offered", func(t *testing.T) {
		t.Parallel()
		b := setupSSO(t)
		_, body := do(t, client(t), http.MethodGet, b.srv.URL+"/login", nil)
		require.Contains(t, body, `href="/login/sso"`)
		require.Contains(t, body, "Sign in with Demo IdP")
		require.Contains(t, body, `name="password"`)
	})
	t.Run("local off", func(t *testing.T) {
		t.Parallel()
		b := setupSSO(t, func(c *web.Config) { c.NoLocalSignIn = true })
		_, body := do(t, client(t), http.MethodGet, b.srv.URL+"/login", nil)
		require.Contains(t, body, `href="/login/sso"`)
		require.NotContains(t, body, `name="password"`)
		resp, body := do(t, client(t), http.MethodPost, b.srv.URL+"/login", url.Values{"username": {"admin"}, "password": {password("admin")}})
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
		require.Contains(t, body, "Local sign-in is turned off")
	})
	t.Run("no sso: the page is as before", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, body := do(t, client(t), http.MethodGet, b.srv.URL+"/login", nil)
		require.NotContains(t, body, "/login/sso")
		resp, _ := do(t, client(t), http.MethodGet, b.srv.URL+"/login/sso", nil)
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
	})
}

func TestSSOSignOut(t *testing.T) {
	t.Parallel()
	b := setupSSO(t)
	br := b.browser(t)
	resp, _ := b.ssoSignIn(t, br, "adam", "pw-adam")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, body := do(t, br, http.MethodPost, b.srv.URL+"/logout", url.Values{})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, "Signed out")
	require.Contains(t, body, b.idp.Issuer()+"/end_session?client_id=unstuck-console")
	resp, _ = b.get(t, br, "/")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the console's session ended")
	link := regexp.MustCompile(`href="(http://[^"]+/end_session\?[^"]+)"`).FindStringSubmatch(body)
	require.Len(t, link, 2)
	resp, _ = do(t, client(t), http.MethodGet, html.UnescapeString(link[1]), nil)
	require.Equal(t, http.StatusFound, resp.StatusCode, "the provider accepts the end-session request")
	require.Equal(t, ssoConsole+"/login", resp.Header.Get("Location"))
	outs := ssoEntries(t, b, "user.sign_out", audit.OutcomeApplied)
	require.Len(t, outs, 1)
	require.Equal(t, "adam", outs[0].Actor)
	var st map[string]any
	require.NoError(t, json.Unmarshal(outs[0].Before, &st))
	require.Equal(t, "sub-admin", st["subject"])
}
