package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/sso"
	"github.com/unstuckhq/unstuck/internal/sso/devidp"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
)

// setupPersons starts a provider with users and the console with single
// sign-on, its bulk decisions knowing who is one person as cmd/console
// wires them (BulkParts.Persons: the console's store).
func setupPersons(t *testing.T, users []devidp.User) ssoBundle {
	t.Helper()
	idp, err := devidp.Start("127.0.0.1:0", devidp.Config{ClientID: "unstuck-console", ClientSecret: "console-secret",
		RedirectURIs: []string{ssoConsole + "/login/sso/callback"}, PostLogoutRedirectURIs: []string{ssoConsole + "/login"}, Users: users})
	require.NoError(t, err)
	t.Cleanup(func() { _ = idp.Close() })
	client, err := sso.New(sso.Config{Issuer: idp.Issuer(), ClientID: "unstuck-console", ClientSecret: "console-secret",
		RedirectURL: ssoConsole + "/login/sso/callback"})
	require.NoError(t, err)
	roles, err := sso.ParseRoleMap(strings.NewReader(ssoRoles))
	require.NoError(t, err)
	b := setup(t, func(c *web.Config) {
		c.SSO = &web.SSO{Client: client, Roles: roles, Label: "Sign in with Demo IdP", PostLogoutURL: ssoConsole + "/login"}
		c.Bulks = newBulks(t, c, nil, c.Store.(*store.DB), ops.BulkConfig{})
	})
	return ssoBundle{bundle: b, idp: idp}
}

// ssoSession signs in at the provider as username and returns the
// browser, checking the console account it signed in as.
func (b ssoBundle) ssoSession(t *testing.T, username, pw, account string) *http.Client {
	t.Helper()
	br := b.browser(t)
	resp, body := b.ssoSignIn(t, br, username, pw)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	_, body = b.get(t, br, "/")
	require.Contains(t, body, account, "signed in as %s", account)
	return br
}

// requestForget records, as requester, a bulk forget of one pending key of
// its own, waiting for approval, and returns its id.
func requestForget(t *testing.T, b *bundle, requester, role, key string) string {
	t.Helper()
	ctx := context.Background()
	pendingKey(t, b, key)
	spec := ops.BulkSpec{Kind: ops.BulkKeys, Action: "forget", IncludeMayHaveHappened: true,
		KeyFilter: idemdriver.KeyFilter{ExternalRef: "prov-" + key}, FilterQuery: "external_ref=prov-" + key}
	p, err := b.bulks.Preview(ctx, spec)
	require.NoError(t, err)
	require.EqualValues(t, 1, p.Legal)
	req, _, err := b.bulks.Request(ctx, ops.Actor{Username: requester, Role: role}, spec, "provider outage, safe to rerun", p.Legal)
	require.NoError(t, err)
	require.Equal(t, store.BulkWaitingApproval, req.Status)
	return itoa(req.ID)
}

// noFollow is a client with c's cookies that does not follow redirects.
func noFollow(t *testing.T, c *http.Client) *http.Client {
	t.Helper()
	stop := client(t)
	stop.Jar = c.Jar
	return stop
}

// postJSON posts form to path as c, asking for problem+json, and decodes
// the answer.
func postJSON(t *testing.T, b *bundle, c *http.Client, path string, form url.Values) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+path, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var got map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	return resp.StatusCode, got
}

// TestFourEyesPerPersonLinkedByAdmin: SPEC K13 per person — a local
// account and its owner's single sign-on account ("support" and
// "support-2"), once an admin links them on /users, cannot approve or
// reject each other's request: 403, audited as denied whichever account
// is used. The link and the unlink are admin-only POSTs, refused
// cross-site, audited; bad input names the field.
func TestFourEyesPerPersonLinkedByAdmin(t *testing.T) {
	t.Parallel()
	b := setupPersons(t, []devidp.User{
		// The owner of the local "support" account, at the provider: the
		// console names their account support-2.
		{Subject: "sub-support-owner", Username: "support", Password: "pw-owner", Name: "Sue Support", Email: "sue@example.com", Groups: []string{"support-team"}},
	})
	ctx := context.Background()
	local := signIn(t, b.bundle, store.RoleSupport)
	ssoAcct := b.ssoSession(t, "support", "pw-owner", "support-2")
	admin := signIn(t, b.bundle, store.RoleAdmin)

	// Linking: admin only, same-origin only; bad names refused with the
	// field named.
	resp, _ := do(t, local, http.MethodPost, b.srv.URL+"/users/support/link", url.Values{"same_as": {"support-2"}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "support may not link accounts")
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/users/support/link", strings.NewReader(url.Values{"same_as": {"support-2"}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err = admin.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "cross-site: refused like every form")
	for _, c := range []struct{ sameAs, says string }{
		{"nobody", "no user named"},
		{"support", "cannot be linked to itself"},
		{"", "name the other account"},
	} {
		status, problem := postJSON(t, b.bundle, admin, "/users/support/link", url.Values{"same_as": {c.sameAs}})
		require.Equal(t, http.StatusBadRequest, status, "same_as %q", c.sameAs)
		require.Equal(t, "invalid", problem["code"])
		require.Equal(t, "same_as", problem["field"])
		require.Contains(t, strings.ToLower(problem["detail"].(string)), c.says)
	}
	resp, body := do(t, admin, http.MethodPost, b.srv.URL+"/users/support/link", url.Values{"same_as": {"nobody"}})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, `id="link-error-support" data-field="same_as"`, "the message is next to the field")
	require.Contains(t, body, `value="nobody" aria-invalid="true" aria-describedby="link-error-support"`)
	status, problem := postJSON(t, b.bundle, admin, "/users/nobody/link", url.Values{"same_as": {"support"}})
	require.Equal(t, http.StatusNotFound, status, "%v", problem)
	samePerson, err := b.db.SamePerson(ctx, "support", "support-2")
	require.NoError(t, err)
	require.False(t, samePerson, "nothing linked by a refused link")

	resp, _ = do(t, admin, http.MethodPost, b.srv.URL+"/users/support/link", url.Values{"same_as": {" support-2 "}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/users?linked=support", resp.Header.Get("Location"))
	_, body = do(t, admin, http.MethodGet, b.srv.URL+"/users?linked=support", nil)
	require.Contains(t, body, "support is linked as one person")
	require.Regexp(t, `data-testid="person-support">\s*Same person as\s*<ul class="person"><li>support-2 <span class="muted">\(linked\)`, body)
	require.Regexp(t, `data-testid="person-support-2">\s*Same person as\s*<ul class="person"><li>support <span class="muted">\(linked\)`, body)
	require.Contains(t, body, `action="/users/support/unlink"`)
	require.Regexp(t, `data-testid="person-oncall">\s*<span class="muted">this account only`, body)
	linked, _, err := b.trail.List(ctx, audit.Filter{Action: "user.link", Outcome: audit.OutcomeApplied})
	require.NoError(t, err)
	require.Len(t, linked, 1)
	require.Equal(t, store.RoleAdmin, linked[0].Actor)
	require.Equal(t, "support", linked[0].TargetID)
	require.JSONEq(t, `{"linked_with":[]}`, string(linked[0].Before))
	require.JSONEq(t, `{"linked_with":["support-2"]}`, string(linked[0].After))

	// The local account's request: its owner's SSO account may neither
	// approve nor reject it; and the other way round.
	fromLocal := requestForget(t, b.bundle, "support", store.RoleSupport, "person-linked-0001")
	fromSSO := requestForget(t, b.bundle, "support-2", store.RoleSupport, "person-linked-0002")
	for _, c := range []struct {
		who    *http.Client
		actor  string
		id     string
		action string
	}{
		{ssoAcct, "support-2", fromLocal, "approve"},
		{ssoAcct, "support-2", fromLocal, "reject"},
		{local, "support", fromSSO, "approve"},
	} {
		resp, body := do(t, c.who, http.MethodPost, b.srv.URL+"/approvals/"+c.id+"/"+c.action, url.Values{"reason": {"looks right to me"}})
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "%s may not %s request %s: %s", c.actor, c.action, c.id, body)
	}
	denied, _, err := b.trail.List(ctx, audit.Filter{Action: "bulk.approve", Outcome: audit.OutcomeDenied})
	require.NoError(t, err)
	actors := map[string]int{}
	for _, e := range denied {
		actors[e.Actor]++
	}
	require.Equal(t, map[string]int{"support-2": 1, "support": 1}, actors, "each refusal audited as denied, under the account used")
	rejected, _, err := b.trail.List(ctx, audit.Filter{Action: "bulk.reject", Outcome: audit.OutcomeDenied, Actor: "support-2"})
	require.NoError(t, err)
	require.Len(t, rejected, 1)
	for _, id := range []string{fromLocal, fromSSO} {
		got := bulkStatus(t, b.bundle, admin, id)
		require.Equal(t, "waiting_approval", got["status"], "request %s still waits for a second person", id)
	}
	_, page := do(t, ssoAcct, http.MethodGet, b.srv.URL+"/bulk/"+fromLocal, nil)
	require.NotContains(t, page, "Approve request "+fromLocal, "no approve control for another account of the requester")

	// Unlinked, they are two people again: the SSO account approves.
	resp, _ = do(t, admin, http.MethodPost, b.srv.URL+"/users/support-2/unlink", url.Values{})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	unlinked, _, err := b.trail.List(ctx, audit.Filter{Action: "user.unlink", Outcome: audit.OutcomeApplied})
	require.NoError(t, err)
	require.Len(t, unlinked, 1)
	require.Equal(t, "support-2", unlinked[0].TargetID)
	require.JSONEq(t, `{"linked_with":["support"]}`, string(unlinked[0].Before))
	require.JSONEq(t, `{"linked_with":[]}`, string(unlinked[0].After))
	_, body = do(t, admin, http.MethodGet, b.srv.URL+"/users?unlinked=support-2", nil)
	require.Regexp(t, `data-testid="person-support">\s*<span class="muted">this account only`, body)
	require.NotContains(t, body, `action="/users/support/unlink"`)
	_, page = do(t, ssoAcct, http.MethodGet, b.srv.URL+"/bulk/"+fromLocal, nil)
	require.Contains(t, page, "Approve request "+fromLocal, "two people again: the control is back")
	resp, body = do(t, noFollow(t, ssoAcct), http.MethodPost, b.srv.URL+"/approvals/"+fromLocal+"/approve", url.Values{"reason": {"checked"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, "running", bulkStatus(t, b.bundle, admin, fromLocal)["status"])
}

// TestFourEyesPerPersonSameVerifiedEmail: two single sign-on accounts
// whose provider verified the same email (its case aside) are one person:
// neither approves the other's request (403, audited as denied under the
// account used). An account whose email the provider did not verify is
// another person, however alike the email.
func TestFourEyesPerPersonSameVerifiedEmail(t *testing.T) {
	t.Parallel()
	b := setupPersons(t, []devidp.User{
		{Subject: "sub-sam-1", Username: "sam", Password: "pw-sam", Name: "Sam", Email: "Sam@Example.com", Groups: []string{"support-team"}},
		{Subject: "sub-sam-2", Username: "sam.ops", Password: "pw-sam-ops", Name: "Sam (ops)", Email: "sam@example.COM", Groups: []string{"oncall-team"}},
		{Subject: "sub-sam-3", Username: "sam.other", Password: "pw-sam-other", Name: "Not Sam", Email: "sam@example.com", EmailUnverified: true,
			Groups: []string{"support-team"}},
	})
	ctx := context.Background()
	sam := b.ssoSession(t, "sam", "pw-sam", "sam")
	samOps := b.ssoSession(t, "sam.ops", "pw-sam-ops", "sam.ops")
	other := b.ssoSession(t, "sam.other", "pw-sam-other", "sam.other")
	for name, verified := range map[string]bool{"sam": true, "sam.ops": true, "sam.other": false} {
		u, ok, err := b.db.UserByUsername(ctx, name)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, verified, u.EmailVerified, "%s: the provider's email_verified claim is stored", name)
	}

	fromSam := requestForget(t, b.bundle, "sam", store.RoleSupport, "person-email-0001")
	fromOps := requestForget(t, b.bundle, "sam.ops", store.RoleOncall, "person-email-0002")
	resp, body := do(t, samOps, http.MethodPost, b.srv.URL+"/approvals/"+fromSam+"/approve", url.Values{"reason": {"fine"}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, body)
	resp, body = do(t, sam, http.MethodPost, b.srv.URL+"/approvals/"+fromOps+"/approve", url.Values{"reason": {"fine"}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, body)
	denied, _, err := b.trail.List(ctx, audit.Filter{Action: "bulk.approve", Outcome: audit.OutcomeDenied})
	require.NoError(t, err)
	actors := map[string]int{}
	for _, e := range denied {
		actors[e.Actor]++
	}
	require.Equal(t, map[string]int{"sam.ops": 1, "sam": 1}, actors, "each refusal audited as denied, under the account used")

	admin := signIn(t, b.bundle, store.RoleAdmin)
	_, page := do(t, admin, http.MethodGet, b.srv.URL+"/users", nil)
	require.Regexp(t, `data-testid="person-sam">\s*Same person as\s*<ul class="person"><li>sam.ops <span class="muted">\(same verified e-mail\)</span></li></ul>`, page)
	require.Regexp(t, `data-testid="person-sam.other">\s*<span class="muted">this account only`, page, "an unverified email links nothing")
	require.NotContains(t, page, `action="/users/sam/unlink"`, "nothing for an admin to unlink")

	// The unverified account is another person: it approves.
	resp, body = do(t, noFollow(t, other), http.MethodPost, b.srv.URL+"/approvals/"+fromSam+"/approve", url.Values{"reason": {"checked"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, "running", bulkStatus(t, b.bundle, admin, fromSam)["status"])
}
