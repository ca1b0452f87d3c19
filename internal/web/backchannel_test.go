package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/sso/devidp"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
)

// setupBackChannel is setupSSO with back-channel logout on, its URI
// registered at the provider.
func setupBackChannel(t *testing.T, opts ...func(*web.Config)) ssoBundle {
	t.Helper()
	b := setupSSO(t, append([]func(*web.Config){func(c *web.Config) { c.SSO.BackChannelLogout = true }}, opts...)...)
	b.idp.SetBackChannelLogoutURI(b.srv.URL + web.BackChannelLogoutPath)
	return b
}

// postLogout POSTs a logout token as the provider does, and returns the
// status and the problem's code (if any).
func (b ssoBundle) postLogout(t *testing.T, token string) (int, string) {
	t.Helper()
	status, body, err := b.idp.PostLogoutToken(t.Context(), token)
	require.NoError(t, err)
	var p struct {
		Code string `json:"code"`
	}
	if len(body) > 0 {
		require.NoError(t, json.Unmarshal(body, &p), "%s", body)
	}
	return status, p.Code
}

// signedIn reports whether c's session still works: 200 on the overview,
// or the redirect to the sign-in page.
func (b ssoBundle) signedIn(t *testing.T, c *http.Client) bool {
	t.Helper()
	resp, _ := b.get(t, c, "/")
	if resp.StatusCode == http.StatusSeeOther {
		require.Equal(t, "/login", resp.Header.Get("Location"))
		return false
	}
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return true
}

// TestSSOBackChannelLogout: the provider's logout token ends every session
// of its user at once, on every device, audited; forged, replayed and
// subject-less tokens are refused with 400 and end nothing.
func TestSSOBackChannelLogout(t *testing.T) {
	t.Parallel()
	b := setupBackChannel(t)
	laptop, phone, other := b.browser(t), b.browser(t), b.browser(t)
	for _, c := range []*http.Client{laptop, phone} {
		resp, body := b.ssoSignIn(t, c, "sam", "pw-sam")
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	}
	resp, body := b.ssoSignIn(t, other, "adam", "pw-adam")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	for _, c := range []*http.Client{laptop, phone, other} {
		require.True(t, b.signedIn(t, c))
	}

	token := func(o devidp.LogoutTokenOptions) string {
		t.Helper()
		raw, err := b.idp.LogoutToken("sam", o)
		require.NoError(t, err)
		return raw
	}
	edit := func(f func(map[string]any)) devidp.LogoutTokenOptions { return devidp.LogoutTokenOptions{Edit: f} }
	for _, c := range []struct {
		name, code string
		opts       devidp.LogoutTokenOptions
	}{
		{"signed with another key", "logout_token_invalid", devidp.LogoutTokenOptions{UnknownKey: true}},
		{"for another client", "logout_token_invalid", edit(func(c map[string]any) { c["aud"] = "another-app" })},
		{"with a nonce", "logout_token_invalid", edit(func(c map[string]any) { c["nonce"] = "abc" })},
		{"without the event", "logout_token_invalid", edit(func(c map[string]any) { delete(c, "events") })},
		{"too old", "logout_token_invalid", edit(func(c map[string]any) { c["iat"] = time.Now().Add(-time.Hour).Unix() })},
		{"a sid and no sub", "logout_token_no_subject", edit(func(c map[string]any) { delete(c, "sub"); c["sid"] = "s-1" })},
	} {
		status, code := b.postLogout(t, token(c.opts))
		require.Equal(t, http.StatusBadRequest, status, c.name)
		require.Equal(t, c.code, code, c.name)
		require.True(t, b.signedIn(t, laptop), "%s: the session stays", c.name)
	}
	require.Empty(t, ssoEntries(t, b, "user.backchannel_logout", ""), "refused tokens are not audited")

	// The genuine token, as the provider sends it.
	genuine := token(devidp.LogoutTokenOptions{})
	status, _ := b.postLogout(t, genuine)
	require.Equal(t, http.StatusOK, status)
	require.False(t, b.signedIn(t, laptop), "ended")
	require.False(t, b.signedIn(t, phone), "ended on every device")
	require.True(t, b.signedIn(t, other), "another user's session stays")

	entries := ssoEntries(t, b, "user.backchannel_logout", audit.OutcomeApplied)
	require.Len(t, entries, 1)
	e := entries[0]
	require.Equal(t, web.BackChannelActor, e.Actor)
	require.Equal(t, "sam", e.TargetID)
	var after map[string]any
	require.NoError(t, json.Unmarshal(e.After, &after))
	require.Equal(t, "sub-support", after["subject"])
	require.EqualValues(t, 2, after["sessions_ended"])
	require.NotContains(t, string(e.After)+e.Reason, genuine[:20], "no token in the trail")

	// Replayed: refused, and the new session it could end stays.
	again := b.browser(t)
	resp, _ = b.ssoSignIn(t, again, "sam", "pw-sam")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	status, code := b.postLogout(t, genuine)
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, "logout_token_replayed", code)
	require.True(t, b.signedIn(t, again), "a replayed token ends nothing")

	// The provider's own send, through BackChannelLogout.
	st, err := b.idp.BackChannelLogout(t.Context(), "sam")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, st)
	require.False(t, b.signedIn(t, again))

	// A user the console never saw: nothing to end, 200, nothing audited.
	st, err = b.idp.BackChannelLogout(t.Context(), "nina")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, st)
	require.Len(t, ssoEntries(t, b, "user.backchannel_logout", audit.OutcomeApplied), 2)

	// A new sign-in after the logout works (the provider vouches again).
	fresh := b.browser(t)
	resp, _ = b.ssoSignIn(t, fresh, "sam", "pw-sam")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.True(t, b.signedIn(t, fresh))
}

// TestSSOBackChannelLogoutHTTP: the endpoint's HTTP contract: no session
// or cross-origin check (server to server), no-store on every answer, a
// form field only, 405 for other methods, refusals throttled per address,
// and no endpoint at all unless turned on.
func TestSSOBackChannelLogoutHTTP(t *testing.T) {
	t.Parallel()
	b := setupBackChannel(t)
	endpoint := b.srv.URL + web.BackChannelLogoutPath
	post := func(body string, header map[string]string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, endpoint, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp
	}
	raw, err := b.idp.LogoutToken("sam", devidp.LogoutTokenOptions{})
	require.NoError(t, err)
	// A provider's server sends no cookie, no Origin and no Sec-Fetch-*;
	// one that does (cross-site) is still heard: the token authenticates.
	resp := post(url.Values{"logout_token": {raw}}.Encode(), map[string]string{"Origin": "https://idp.example.com", "Sec-Fetch-Site": "cross-site"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	require.Empty(t, resp.Cookies(), "no session is made")

	resp = post("logout_token=", nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))

	resp = post("logout_token="+strings.Repeat("a", 20<<10), nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "over 16 KiB")

	resp, _ = do(t, client(t), http.MethodGet, endpoint, nil)
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)

	// Refusals from one address are throttled (the two above and these).
	var last *http.Response
	for range 25 {
		if last = post("logout_token=forged", nil); last.StatusCode == http.StatusTooManyRequests {
			break
		}
	}
	require.Equal(t, http.StatusTooManyRequests, last.StatusCode)
	require.NotEmpty(t, last.Header.Get("Retry-After"))

	off := setupSSO(t)
	resp, _ = do(t, client(t), http.MethodPost, off.srv.URL+web.BackChannelLogoutPath, url.Values{"logout_token": {raw}})
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "no endpoint unless back-channel logout is on")
}

// TestLocalSignInOverSSO: a local sign-in in a browser whose session was
// signed in through the provider starts a clean session: nothing of the
// provider's user survives (no subject, no re-authentication at the
// provider), and the sign-out is audited as the local user only.
func TestLocalSignInOverSSO(t *testing.T) {
	t.Parallel()
	// Re-authentication at once: a surviving SSO marker would send the
	// local session to the provider.
	b := setupSSO(t, func(c *web.Config) { c.SSO.ReauthAfter = time.Nanosecond })
	br := b.browser(t)
	resp, body := b.ssoSignIn(t, br, "sam", "pw-sam")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)

	stop := client(t)
	stop.Jar = br.Jar
	resp, _ = do(t, stop, http.MethodPost, b.srv.URL+"/login", url.Values{"username": {store.RoleSupport}, "password": {password(store.RoleSupport)}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/", resp.Header.Get("Location"))
	resp, body = b.get(t, br, "/keys")
	require.Equal(t, http.StatusOK, resp.StatusCode, "a local session is not sent through the provider: %s", resp.Header.Get("Location"))
	require.Contains(t, body, store.RoleSupport)

	resp, _ = do(t, stop, http.MethodPost, b.srv.URL+"/logout", url.Values{})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "a local session's sign-out: no provider page")
	require.Equal(t, "/login", resp.Header.Get("Location"))

	outs := ssoEntries(t, b, "user.sign_out", audit.OutcomeApplied)
	require.Len(t, outs, 1)
	require.Equal(t, store.RoleSupport, outs[0].Actor)
	require.Equal(t, store.RoleSupport, outs[0].TargetID)
	require.JSONEq(t, `{"source":"local","role":"support"}`, string(outs[0].Before))
	require.NotContains(t, string(outs[0].Before)+string(outs[0].After), "sub-support")

	ins := ssoEntries(t, b, "user.sign_in", audit.OutcomeApplied)
	require.Len(t, ins, 2, "the provider's sign-in, then the local one")
	var local audit.Entry
	for _, e := range ins {
		if e.Actor == store.RoleSupport {
			local = e
		}
	}
	require.JSONEq(t, `{"source":"local","role":"support"}`, string(local.After))
}

// TestLocalSignInCancelsPendingSSO: a local sign-in while a sign-in
// through the provider is under way in the same browser drops it: its
// callback is refused, and the session stays the local user's.
func TestLocalSignInCancelsPendingSSO(t *testing.T) {
	t.Parallel()
	b := setupSSO(t)
	br := b.browser(t)
	cb := b.callbackOf(t, br, "sam", "pw-sam")
	stop := client(t)
	stop.Jar = br.Jar
	resp, _ := do(t, stop, http.MethodPost, b.srv.URL+"/login", url.Values{"username": {store.RoleOncall}, "password": {password(store.RoleOncall)}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, body := do(t, stop, http.MethodGet, cb, nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	require.Contains(t, body, "Sign-in not recognised")
	_, body = b.get(t, br, "/")
	require.Contains(t, body, store.RoleOncall, "still the local user")
	_, ok, err := b.db.UserBySubject(t.Context(), "sub-support")
	require.NoError(t, err)
	require.False(t, ok, "the provider's user was not signed in")
}
