package web_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/incident"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// withAPI serves the operator API, its tokens in the console's store.
func withAPI(c *web.Config) { c.Tokens = c.Store.(*store.DB) }

// apiToken makes a token: a user's (owner) or a service token (role).
func apiToken(t *testing.T, b *bundle, name, owner, role string, expires time.Time) string {
	t.Helper()
	secret, hash := store.NewTokenSecret()
	_, err := b.db.CreateAPIToken(context.Background(), store.APIToken{Name: name, Owner: owner, Role: role, CreatedBy: "test", ExpiresAt: expires}, hash)
	require.NoError(t, err)
	return secret
}

// apiDo sends an API request with token (none when empty) and body (none
// when empty), with extra headers as name, value pairs.
func apiDo(t *testing.T, b *bundle, token, method, path, body string, headers ...string) (*http.Response, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, b.srv.URL+path, rd)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client(t).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	if strings.Contains(resp.Header.Get("Content-Type"), "json") {
		require.NoError(t, json.Unmarshal(raw, &out), string(raw))
	}
	return resp, out
}

// TestAPIRoutesMappedAndDocumented: every API route needs the permission
// of a console route (one table), and the OpenAPI document names exactly
// the routes there are.
func TestAPIRoutesMappedAndDocumented(t *testing.T) {
	t.Parallel()
	fake := &fakeVerifier{}
	b := setup(t, withAPI, func(c *web.Config) { c.Verify = fake })
	routed := map[string]bool{}
	require.NoError(t, chi.Walk(b.router, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		rest, ok := strings.CutPrefix(route, web.APIPrefix)
		if !ok {
			return nil
		}
		routed[method+" "+rest] = true
		if rest == "/openapi.json" {
			return nil
		}
		perm, ok := web.APIPermissionForTest(method, route)
		require.True(t, ok, "API route %s %s has no console permission", method, route)
		require.NotContains(t, perm, "{", "in the policy's form")
		return nil
	}))
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(web.OpenAPIForTest(), &doc))
	require.Equal(t, "3.1.0", doc.OpenAPI)
	documented := map[string]bool{}
	for p, methods := range doc.Paths {
		for m := range methods {
			documented[strings.ToUpper(m)+" "+p] = true
		}
	}
	for r := range routed {
		require.True(t, documented[r], "route %s is not in the OpenAPI document", r)
	}
	for d := range documented {
		require.True(t, routed[d], "the OpenAPI document names %s, which is not routed", d)
	}

	resp, _ := apiDo(t, b, "", http.MethodGet, web.APIPrefix+"/openapi.json", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, "the document needs no token")

	// A verification asked through the API, as the token's user.
	id, version := pendingKey(t, b, "api-verify-000001")
	token := apiToken(t, b, "support-cli", store.RoleSupport, "", time.Time{})
	resp, body := apiDo(t, b, token, http.MethodPost, web.APIPrefix+"/keys/"+itoa(id)+"/verify", `{"version":`+itoa(version)+`,"reason":"the customer says it is stuck"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, []string{"support " + itoa(id) + " v" + itoa(version) + " the customer says it is stuck"}, fake.calls)
}

// TestAPIAuthentication: SPEC K25 — a bearer token and nothing else
// authenticates on the API; a token is nothing on the console's pages.
func TestAPIAuthentication(t *testing.T) {
	t.Parallel()
	b := setup(t, withAPI)
	ctx := context.Background()
	good := apiToken(t, b, "reader", store.RoleAuditor, "", time.Time{})
	service := apiToken(t, b, "bot", "", store.RoleSupport, time.Now().Add(time.Hour))
	expired := apiToken(t, b, "old", "", store.RoleSupport, time.Now().Add(-time.Second))
	revoked := apiToken(t, b, "gone", "", store.RoleSupport, time.Time{})
	_, _, err := b.db.RevokeAPIToken(ctx, "gone", time.Now())
	require.NoError(t, err)
	_, hash := store.NewTokenSecret()
	_, err = b.db.CreateAPIToken(ctx, store.APIToken{Name: "disabled-user", Owner: store.RoleOncall, CreatedBy: "test"}, hash)
	require.NoError(t, err)

	for name, token := range map[string]string{"none": "", "garbage": "not-a-token", "unknown": "unstuck_" + strings.Repeat("A", 43),
		"expired": expired, "revoked": revoked} {
		resp, body := apiDo(t, b, token, http.MethodGet, web.APIPrefix+"/keys", "")
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, name)
		require.Equal(t, "unauthorized", body["code"], name)
		require.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer", name)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), name)
	}

	resp, body := apiDo(t, b, good, http.MethodGet, web.APIPrefix+"/keys", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, body["items"], 1)
	require.Equal(t, float64(b.keyID), body["items"].([]any)[0].(map[string]any)["id"])
	resp, body = apiDo(t, b, service, http.MethodGet, web.APIPrefix+"/keys/"+itoa(b.keyID), "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotContains(t, body, "result", "no stored response through the API")
	resp, body = apiDo(t, b, good, http.MethodGet, web.APIPrefix+"/keys?state=nope", "")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "state", body["field"])
	resp, body = apiDo(t, b, good, http.MethodGet, web.APIPrefix+"/operations/"+b.opID, "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "review_required", body["status"])
	require.NotContains(t, body, "input", "no operation data through the API")

	// A user token acts as its user: disabled, it is refused.
	require.NoError(t, b.db.SetUserDisabled(ctx, store.RoleOncall, true))
	resp, _ = apiDo(t, b, "", http.MethodGet, web.APIPrefix+"/keys", "", "Authorization", "Bearer "+mustSecretOf(t, b, "disabled-user"))
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	// A session cookie is no credential on the API.
	support := signIn(t, b, store.RoleSupport)
	req, err := http.NewRequest(http.MethodGet, b.srv.URL+web.APIPrefix+"/keys", nil)
	require.NoError(t, err)
	r2, err := support.Do(req)
	require.NoError(t, err)
	r2.Body.Close()
	require.Equal(t, http.StatusUnauthorized, r2.StatusCode, "a cookie without a bearer")

	// A bearer token is no session on the console's pages.
	resp, _ = apiDo(t, b, good, http.MethodGet, "/keys", "")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/login", resp.Header.Get("Location"))
	resp, _ = apiDo(t, b, good, http.MethodPost, "/keys/"+itoa(b.keyID)+"/forget", "")
	require.NotEqual(t, http.StatusOK, resp.StatusCode)
	require.NotEqual(t, http.StatusSeeOther, resp.StatusCode)

	got, ok, err := b.db.APITokenByHash(ctx, store.HashTokenSecret(good))
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, got.LastUsedAt.IsZero(), "the last use is recorded")

	// Bodies are bounded; unknown fields are named.
	resp, _ = apiDo(t, b, service, http.MethodPost, web.APIPrefix+"/keys/"+itoa(b.keyID)+"/forget", `{"reason":"`+strings.Repeat("x", 70<<10)+`"}`)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	resp, body = apiDo(t, b, service, http.MethodPost, web.APIPrefix+"/keys/"+itoa(b.keyID)+"/forget", `{"reason":"checked","versoin":1}`)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "versoin", body["field"])
	resp, body = apiDo(t, b, service, http.MethodPost, web.APIPrefix+"/keys/"+itoa(b.keyID)+"/forget", `{"version":"1"}`)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "version", body["field"])
	resp, body = apiDo(t, b, service, http.MethodPost, web.APIPrefix+"/keys/"+itoa(b.keyID)+"/forget", `{"version":1,"reason":"nul \u0000 in the reason"}`)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "reason", body["field"], "the forms' own validation")
	resp, body = apiDo(t, b, service, http.MethodPost, web.APIPrefix+"/keys/"+itoa(b.keyID)+"/forget", "{\"version\":1,\"reason\":\"bad \xff byte in the reason\"}")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "invalid", body["code"])
	resp, _ = apiDo(t, b, service, http.MethodPost, web.APIPrefix+"/keys/"+itoa(b.keyID)+"/forget", `{"version":1} {"version":2}`)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "one JSON object")

	// No token, good or bad, is ever logged.
	logs := b.logs.String()
	require.NotEmpty(t, logs, "the handler logged the refusals")
	for _, secret := range []string{good, service, expired, revoked, "unstuck_" + strings.Repeat("A", 43)} {
		require.NotContains(t, logs, secret)
		require.NotContains(t, logs, secret[len("unstuck_"):])
	}
}

// TestAPIRateLimit: each token has its bucket (40 at once, 20 a second);
// past it, 429 with Retry-After. The console's clock stands still here, so
// the bucket does not refill.
func TestAPIRateLimit(t *testing.T) {
	t.Parallel()
	fixed := time.Now()
	b := setup(t, withAPI, func(c *web.Config) { c.NowFunc = func() time.Time { return fixed } })
	one := apiToken(t, b, "one", "", store.RoleAuditor, time.Time{})
	other := apiToken(t, b, "other", "", store.RoleAuditor, time.Time{})
	for i := range 40 {
		resp, _ := apiDo(t, b, one, http.MethodGet, web.APIPrefix+"/bulk/0", "")
		require.NotEqual(t, http.StatusTooManyRequests, resp.StatusCode, "request %d", i)
	}
	resp, body := apiDo(t, b, one, http.MethodGet, web.APIPrefix+"/bulk/0", "")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "too_many_requests", body["code"])
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	resp, _ = apiDo(t, b, other, http.MethodGet, web.APIPrefix+"/keys", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, "another token has its own bucket")
}

// mustSecretOf makes a fresh secret for the token name: the tests keep no
// secret, so this rewrites its hash.
func mustSecretOf(t *testing.T, b *bundle, name string) string {
	t.Helper()
	secret, hash := store.NewTokenSecret()
	_, err := b.sqlDB.ExecContext(context.Background(), `UPDATE unstuck_console_api_token SET secret_hash = ? WHERE name = ?`, hash, name)
	require.NoError(t, err)
	return secret
}

// lastEntry is the newest audit entry on the target.
func lastEntry(t *testing.T, b *bundle, kind, id string) audit.Entry {
	t.Helper()
	hist, err := b.trail.History(context.Background(), kind, id, 1)
	require.NoError(t, err)
	require.NotEmpty(t, hist, "%s %s has an audit entry", kind, id)
	return hist[0]
}

// sameState compares two audit states of twin targets, without what
// tells one twin from the other: its name, IDs, digest, fence and times.
func sameState(t *testing.T, a, b json.RawMessage, twinA, twinB string, msg string) {
	t.Helper()
	var drop func(v any) any
	drop = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range []string{"id", "key_digest", "key_hash", "fence", "updated_at", "created_at", "finished_at", "started_at", "at"} {
				delete(x, k)
			}
			for k, e := range x {
				x[k] = drop(e)
			}
		case []any:
			for i, e := range x {
				x[i] = drop(e)
			}
		}
		return v
	}
	norm := func(raw json.RawMessage, twin string) any {
		var v any
		if len(raw) == 0 {
			return nil
		}
		require.NoError(t, json.Unmarshal([]byte(strings.ReplaceAll(string(raw), twin, "TWIN")), &v))
		return drop(v)
	}
	require.Equal(t, norm(a, twinA), norm(b, twinB), msg)
}

// TestAPIDecisionsAsForms: SPEC K25 — each decision applied once through
// the form and once through the API, on twin records, leaves the same
// state and the same audit entry; the API's entry names the token.
func TestAPIDecisionsAsForms(t *testing.T) {
	t.Parallel()
	type decision struct {
		name, action string
		form         url.Values
		json         string
	}
	keyCases := []decision{
		{"forget", "forget", url.Values{"acknowledge_rerun": {"yes"}}, `"acknowledge_rerun":true`},
		{"confirm happened", "confirm", url.Values{"outcome": {"happened"}, "external_ref": {"ch_1"}}, `"outcome":"happened","external_ref":"ch_1"`},
		{"confirm not happened", "confirm", url.Values{"outcome": {"did_not_happen"}}, `"outcome":"did_not_happen"`},
	}
	for _, c := range keyCases {
		t.Run("key "+c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, withAPI)
			token := apiToken(t, b, "oncall-cli", store.RoleOncall, "", time.Time{})
			formID, formVersion := pendingKey(t, b, "twin-form")
			apiID, apiVersion := pendingKey(t, b, "twin-api")
			require.Equal(t, formVersion, apiVersion)
			reason := "checked at the provider: " + c.name
			form := url.Values{"version": {itoa(formVersion)}, "reason": {reason}, "form_key": {"form-key-twin-" + strings.ReplaceAll(c.name, " ", "-")}}
			for k, v := range c.form {
				form[k] = v
			}
			oncall := signIn(t, b, store.RoleOncall)
			resp, body := do(t, oncall, http.MethodPost, b.srv.URL+"/keys/"+itoa(formID)+"/"+c.action, form)
			require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
			resp, out := apiDo(t, b, token, http.MethodPost, web.APIPrefix+"/keys/"+itoa(apiID)+"/"+c.action,
				`{"version":`+itoa(apiVersion)+`,"reason":"`+reason+`",`+c.json+`}`)
			require.Equal(t, http.StatusOK, resp.StatusCode, out)
			require.Equal(t, true, out["applied"])
			if out["removed"] == true {
				resp, gone := apiDo(t, b, token, http.MethodGet, web.APIPrefix+"/keys/"+itoa(apiID), "")
				require.Equal(t, http.StatusNotFound, resp.StatusCode)
				require.Contains(t, gone["detail"], "by oncall", "who removed it")
			}

			fr, fok, err := b.records.KeyByID(context.Background(), formID)
			require.NoError(t, err)
			ar, aok, err := b.records.KeyByID(context.Background(), apiID)
			require.NoError(t, err)
			require.Equal(t, fok, aok, "both removed or both kept")
			require.Equal(t, fr.Status, ar.Status)
			require.Equal(t, fr.Version, ar.Version)
			require.Equal(t, fr.ExternalRef != "", ar.ExternalRef != "")

			fe, ae := lastEntry(t, b, "key", itoa(formID)), lastEntry(t, b, "key", itoa(apiID))
			require.Equal(t, fe.Action, ae.Action)
			require.Equal(t, fe.Outcome, ae.Outcome)
			require.Equal(t, fe.Reason, ae.Reason)
			require.Equal(t, fe.Role, ae.Role)
			require.Equal(t, store.RoleOncall, fe.Actor)
			require.Equal(t, store.RoleOncall, ae.Actor, "a user token acts as its user")
			require.True(t, strings.HasPrefix(ae.UserAgent, web.TokenAgentPrefix+"oncall-cli;"), ae.UserAgent)
			sameState(t, fe.Before, ae.Before, "twin-form", "twin-api", "before")
			sameState(t, fe.After, ae.After, "twin-form", "twin-api", "after")
		})
	}
	opCases := []decision{
		{"retry", "retry", url.Values{"step": {"workspace"}}, `"step":"workspace"`},
		{"confirm", "confirm", url.Values{"step": {"workspace"}, "outcome": {"happened"}, "external_ref": {"ws-1"}}, `"step":"workspace","outcome":"happened","external_ref":"ws-1"`},
		{"compensate", "compensate", url.Values{}, `"step":"workspace"`},
		{"resolve", "resolve", url.Values{"status": {"completed"}}, `"status":"completed"`},
		{"redrive", "redrive", url.Values{"mode": {"resume"}}, `"mode":"resume"`},
	}
	for _, c := range opCases {
		t.Run("operation "+c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, withAPI)
			b.migrateRiver(t)
			token := apiToken(t, b, "deploy-bot", "", store.RoleAdmin, time.Time{})
			apiOp := seedOperationID(t, b.sagas, "op-web-twin")
			reason := "checked the provider by hand: " + c.name
			form := url.Values{"version": {"7"}, "reason": {reason}, "form_key": {"form-key-op-twin-" + c.name}}
			for k, v := range c.form {
				form[k] = v
			}
			admin := signIn(t, b, store.RoleAdmin)
			resp, body := do(t, admin, http.MethodPost, b.srv.URL+"/operations/"+b.opID+"/"+c.action, form)
			require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
			resp, out := apiDo(t, b, token, http.MethodPost, web.APIPrefix+"/operations/"+apiOp+"/"+c.action,
				`{"version":7,"reason":"`+reason+`",`+c.json+`}`)
			require.Equal(t, http.StatusOK, resp.StatusCode, out)

			fd, err := b.sagas.ReadOperation(context.Background(), b.opID, sagadriver.DefaultMaxEvents)
			require.NoError(t, err)
			ad, err := b.sagas.ReadOperation(context.Background(), apiOp, sagadriver.DefaultMaxEvents)
			require.NoError(t, err)
			fo, ao := fd.Operation, ad.Operation
			require.Equal(t, fo.Status, ao.Status)
			require.Equal(t, fo.Version, ao.Version)
			require.Equal(t, float64(ao.Version), out["version"])

			fe, ae := lastEntry(t, b, "operation", b.opID), lastEntry(t, b, "operation", apiOp)
			require.Equal(t, fe.Action, ae.Action)
			require.Equal(t, fe.Outcome, ae.Outcome)
			require.Equal(t, fe.Reason, ae.Reason)
			require.Equal(t, store.RoleAdmin, ae.Role)
			require.Equal(t, "token:deploy-bot", ae.Actor, "a service token acts as itself")
			sameState(t, fe.Before, ae.Before, b.opID, apiOp, "before")
			sameState(t, fe.After, ae.After, b.opID, apiOp, "after")
		})
	}
}

// TestAPIDecisionRefusals: the API's decisions are refused as the forms'
// are: a stale version (409 with the current one), a role without the
// permission (403), a decision held for approval (202 to the request), and
// an Idempotency-Key replays.
func TestAPIDecisionRefusals(t *testing.T) {
	t.Parallel()
	var bulks *ops.Bulks[*sql.Tx]
	b := setup(t, withAPI, func(c *web.Config) {
		a, err := ops.ParseApproval("bulk,keys.forget")
		require.NoError(t, err)
		bulks = newBulks(t, c, nil, nil, ops.BulkConfig{Approval: a})
		c.Bulks = bulks
	})
	b.migrateRiver(t)
	support := apiToken(t, b, "support-bot", "", store.RoleSupport, time.Time{})
	oncall := apiToken(t, b, "oncall-bot", "", store.RoleOncall, time.Time{})
	path := web.APIPrefix + "/operations/" + b.opID

	resp, body := apiDo(t, b, support, http.MethodPost, path+"/compensate", `{"version":7,"reason":"support may not compensate"}`)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, "forbidden", body["code"])
	denied := lastEntry(t, b, "operation", b.opID)
	require.Equal(t, "token:support-bot", denied.Actor)
	require.Equal(t, audit.OutcomeDenied, denied.Outcome)

	resp, body = apiDo(t, b, oncall, http.MethodPost, path+"/retry", `{"version":6,"step":"workspace","reason":"an old read of the operation"}`)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Equal(t, "stale", body["code"])
	require.Equal(t, float64(7), body["current_version"])

	first, body := apiDo(t, b, oncall, http.MethodPost, path+"/retry", `{"version":7,"step":"workspace","reason":"the provider is back"}`,
		"Idempotency-Key", `"api-retry-key-000001"`)
	require.Equal(t, http.StatusOK, first.StatusCode, body)
	again, body2 := apiDo(t, b, oncall, http.MethodPost, path+"/retry", `{"version":7,"step":"workspace","reason":"the provider is back"}`,
		"Idempotency-Key", `"api-retry-key-000001"`)
	require.Equal(t, http.StatusOK, again.StatusCode)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, body, body2)

	id, version := pendingKey(t, b, "api-held")
	resp, body = apiDo(t, b, support, http.MethodPost, web.APIPrefix+"/keys/"+itoa(id)+"/forget",
		`{"version":`+itoa(version)+`,"reason":"the provider has no such charge","acknowledge_rerun":true}`)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, body)
	loc := resp.Header.Get("Location")
	require.Regexp(t, `^/api/v1/bulk/\d+$`, loc)
	_, ok, err := b.records.KeyByID(context.Background(), id)
	require.NoError(t, err)
	require.True(t, ok, "held, not applied")
	resp, body = apiDo(t, b, oncall, http.MethodGet, loc, "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, store.BulkWaitingApproval, body["status"])
	resp, body = apiDo(t, b, oncall, http.MethodPost, strings.Replace(loc, "/bulk/", "/approvals/", 1)+"/approve", `{"reason":"checked it with the provider too"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.True(t, slices.Contains([]string{"running", "done"}, statusOf(t, b, oncall, loc)))
}

func statusOf(t *testing.T, b *bundle, token, loc string) string {
	t.Helper()
	_, body := apiDo(t, b, token, http.MethodGet, loc, "")
	s, _ := body["status"].(string)
	return s
}

// TestAdminTokens: an admin makes a token on /users, sees it once, and
// revokes it; both are audited by the token's name and ID, never its
// secret; no other role may.
func TestAdminTokens(t *testing.T) {
	t.Parallel()
	b := setup(t, withAPI)
	admin := signIn(t, b, store.RoleAdmin)
	oncall := signIn(t, b, store.RoleOncall)

	resp, page := do(t, admin, http.MethodGet, b.srv.URL+"/users", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, "API tokens")
	require.Contains(t, page, "No API token yet")

	resp, _ = do(t, oncall, http.MethodPost, b.srv.URL+"/tokens", url.Values{"name": {"sneaky"}, "role": {"admin"}, "expires": {"720h"}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	resp, page = do(t, admin, http.MethodPost, b.srv.URL+"/tokens", url.Values{"name": {"Bad Name"}, "role": {"oncall"}, "expires": {"720h"}})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, page, `data-field="name"`)
	resp, page = do(t, admin, http.MethodPost, b.srv.URL+"/tokens", url.Values{"name": {"both"}, "user": {"support"}, "role": {"oncall"}, "expires": {"720h"}})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, page, `data-field="role"`)

	resp, page = do(t, admin, http.MethodPost, b.srv.URL+"/tokens", url.Values{"name": {"deploy-bot"}, "role": {"oncall"}, "expires": {"720h"}})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	secret := regexp.MustCompile(`unstuck_[A-Za-z0-9_-]{43}`).FindString(page)
	require.NotEmpty(t, secret, "shown once")
	resp, _ = apiDo(t, b, secret, http.MethodGet, web.APIPrefix+"/keys", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, page = do(t, admin, http.MethodGet, b.srv.URL+"/users", nil)
	require.Contains(t, page, "token:deploy-bot")
	require.NotContains(t, page, secret, "never shown again")

	resp, _ = do(t, oncall, http.MethodPost, b.srv.URL+"/tokens/deploy-bot/revoke", url.Values{})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp, _ = do(t, admin, http.MethodPost, b.srv.URL+"/tokens/deploy-bot/revoke", url.Values{})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, _ = apiDo(t, b, secret, http.MethodGet, web.APIPrefix+"/keys", "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a revoked token")

	tok, ok, err := b.db.APITokenByHash(context.Background(), store.HashTokenSecret(secret))
	require.NoError(t, err)
	require.True(t, ok)
	hist, err := b.trail.History(context.Background(), "api_token", itoa(tok.ID), 10)
	require.NoError(t, err)
	require.Len(t, hist, 2)
	require.Equal(t, web.ActionTokenRevoke, hist[0].Action)
	require.Equal(t, web.ActionTokenCreate, hist[1].Action)
	for _, e := range hist {
		require.Equal(t, store.RoleAdmin, e.Actor)
		require.Contains(t, string(e.After), `"name":"deploy-bot"`)
		require.NotContains(t, string(e.Before)+string(e.After)+e.Reason, secret)
	}
}

// TestAPIIncidentsAndAudit: the incident groups and the audit trail read
// through the API, with the pages' filters and roles.
func TestAPIIncidentsAndAudit(t *testing.T) {
	t.Parallel()
	b := setup(t, withAPI)
	_, err := (&incident.Snapshotter{Keys: b.records, Ops: b.sagas, Store: b.db}).Once(context.Background())
	require.NoError(t, err)
	auditor := apiToken(t, b, "auditor-bot", "", store.RoleAuditor, time.Time{})
	support := apiToken(t, b, "support-bot", "", store.RoleSupport, time.Time{})
	resp, body := apiDo(t, b, auditor, http.MethodGet, web.APIPrefix+"/incidents", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotEmpty(t, body["groups"], "the operation under review is an incident")
	g := body["groups"].([]any)[0].(map[string]any)
	require.Len(t, g["hourly"], 24)

	_, err = b.db.CreateAPIToken(context.Background(), store.APIToken{Name: "audited", Role: store.RoleSupport, CreatedBy: "test"}, store.HashTokenSecret(store.TokenPrefix+strings.Repeat("b", 43)))
	require.NoError(t, err)
	_, err = b.trail.Append(context.Background(), audit.Entry{Actor: "admin", Role: "admin", Action: web.ActionTokenCreate, TargetKind: "api_token", TargetID: "9", Outcome: audit.OutcomeApplied})
	require.NoError(t, err)
	resp, body = apiDo(t, b, auditor, http.MethodGet, web.APIPrefix+"/audit?action="+web.ActionTokenCreate, "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Len(t, body["items"], 1)
	require.Equal(t, "api_token", body["items"].([]any)[0].(map[string]any)["target_kind"])
	resp, body = apiDo(t, b, auditor, http.MethodGet, web.APIPrefix+"/audit?outcome=nope", "")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "outcome", body["field"])
	resp, _ = apiDo(t, b, support, http.MethodGet, web.APIPrefix+"/audit", "")
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "support does not read the audit trail")
}

// TestAPIBulk: a bulk request made through the API as through the
// console: frozen (201 to the draft), submitted with the typed count (202
// while it waits for approval), approved by a second token's user.
func TestAPIBulk(t *testing.T) {
	t.Parallel()
	b := setup(t, withAPI, func(c *web.Config) {
		a, err := ops.ParseApproval("bulk")
		require.NoError(t, err)
		c.Bulks = newBulks(t, c, nil, nil, ops.BulkConfig{Approval: a})
	})
	support := apiToken(t, b, "support-cli", store.RoleSupport, "", time.Time{})
	oncall := apiToken(t, b, "oncall-cli", store.RoleOncall, "", time.Time{})
	pendingKey(t, b, "bulk-api-1")
	pendingKey(t, b, "bulk-api-2")

	resp, body := apiDo(t, b, support, http.MethodGet, web.APIPrefix+"/keys/bulk?action=forget&state=pending&include_may_have_happened=1", "")
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	loc := resp.Header.Get("Location")
	require.Regexp(t, `^/api/v1/bulk/\d+$`, loc)
	require.Equal(t, store.BulkDraft, statusOf(t, b, support, loc))

	resp, body = apiDo(t, b, support, http.MethodPost, loc+"/submit", `{"reason":"the provider has none of these","confirm_count":1}`)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "the typed count must match")
	require.Equal(t, "confirm_count", body["field"])
	resp, body = apiDo(t, b, support, http.MethodPost, loc+"/submit", `{"reason":"the provider has none of these","confirm_count":2}`)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, body)
	require.Equal(t, store.BulkWaitingApproval, statusOf(t, b, support, loc))

	approve := strings.Replace(loc, "/bulk/", "/approvals/", 1) + "/approve"
	resp, _ = apiDo(t, b, support, http.MethodPost, approve, `{"reason":"approving my own request"}`)
	require.NotEqual(t, http.StatusOK, resp.StatusCode, "not by its requester")
	resp, body = apiDo(t, b, oncall, http.MethodPost, approve, `{"reason":"checked with the provider too"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.NotEqual(t, store.BulkWaitingApproval, statusOf(t, b, oncall, loc))

	resp, _ = apiDo(t, b, support, http.MethodGet, web.APIPrefix+"/operations/bulk?action=compensate&status=review_required", "")
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "support may not compensate, so not in bulk either")
}
