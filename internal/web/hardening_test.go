package web_test

import (
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
)

// TestListFiltersRefuseNULAndInvalidUTF8: a NUL byte or invalid UTF-8 in a
// key or operation filter never reaches the database (PostgreSQL would
// answer an error, a 500). Every list page checks its text filters as
// /audit does: 400 naming the field.
func TestListFiltersRefuseNULAndInvalidUTF8(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := signIn(t, b, store.RoleAdmin)
	long := make([]byte, 257)
	for i := range long {
		long[i] = 'x'
	}
	for _, tc := range []struct{ page, field, value string }{
		{"/keys", "scope", "ip:\x00"},
		{"/keys", "operation", "POST \xff/orders"},
		{"/keys", "correlation_id", "a\x00b"},
		{"/keys", "external_ref", "\xc3"},
		{"/keys", "key", string(long)},
		{"/operations", "type", "sign\x00up"},
		{"/operations", "correlation_id", "\xff\xfe"},
		{"/operations", "external_id", "acct\x00"},
		{"/audit", "actor", "ada\x00"},
	} {
		q := url.Values{tc.field: {tc.value}}
		if tc.field == "key" {
			q.Set("scope", "s")
			q.Set("operation", "o")
		}
		resp, body := do(t, c, http.MethodGet, b.srv.URL+tc.page+"?"+q.Encode(), nil)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s %s=%q", tc.page, tc.field, tc.value)
		require.Contains(t, body, "Field &#34;"+tc.field+"&#34; must be text", "%s %s", tc.page, tc.field)
	}
}

// TestHeadAnswersAsGet: HEAD answers as GET, without a body, never 400.
func TestHeadAnswersAsGet(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := signIn(t, b, store.RoleAuditor)
	resp, body := do(t, client(t), http.MethodHead, b.srv.URL+"/login", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "HEAD /login")
	require.Empty(t, body)
	for _, p := range []string{"/healthz", "/static/app.css", "/", "/keys"} {
		resp, body := do(t, c, http.MethodHead, b.srv.URL+p, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "HEAD %s", p)
		require.Empty(t, body, "HEAD %s", p)
	}
	resp, _ = do(t, c, http.MethodHead, b.srv.URL+"/users", nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "HEAD is authorized as GET")
	resp, _ = do(t, client(t), http.MethodHead, b.srv.URL+"/keys", nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "HEAD needs a session as GET does")

	// HEAD of the audit export gives the download's headers and neither
	// reads nor records the trail.
	resp, body = do(t, c, http.MethodHead, b.srv.URL+"/audit/export?format=csv", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, body)
	require.Contains(t, resp.Header.Get("Content-Disposition"), "attachment")
	require.Empty(t, exports(t, b), "a HEAD is not an export")
}

// TestWrongMethodIs405WithAllow: a wrong method is 405 with the Allow
// header (RFC 9110 §15.5.6), not 400.
func TestWrongMethodIs405WithAllow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodPut, "/healthz", "GET, HEAD"},
		{http.MethodDelete, "/keys", "GET, HEAD"},
		{http.MethodGet, "/logout", "POST"},
		{http.MethodPatch, "/login", "GET, HEAD, POST"},
	} {
		resp, _ := do(t, client(t), tc.method, b.srv.URL+tc.path, nil)
		require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s %s", tc.method, tc.path)
		require.Equal(t, tc.allow, resp.Header.Get("Allow"), "%s %s", tc.method, tc.path)
	}
}

// TestStaticDirectoriesAreNotListed: /static/ serves files, never a
// listing of its directory.
func TestStaticDirectoriesAreNotListed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, p := range []string{"/static/", "/static/.", "/static/nothing.css"} {
		resp, body := do(t, client(t), http.MethodGet, b.srv.URL+p, nil)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, p)
		require.NotContains(t, body, "htmx.LICENSE", p)
	}
	resp, _ := do(t, client(t), http.MethodGet, b.srv.URL+"/static/app.css", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestMetricsCanBeGuarded: /metrics need not be public. A bearer token
// guards it (UNSTUCK_METRICS_TOKEN), or it
// leaves the console's listener for one of its own (--metrics-addr).
func TestMetricsCanBeGuarded(t *testing.T) {
	t.Parallel()
	const token = "metrics-token-0123456789"
	b := setup(t, func(c *web.Config) { c.MetricsToken = token })
	resp, body := do(t, client(t), http.MethodGet, b.srv.URL+"/metrics", nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.NotContains(t, body, "unstuck_idempotency_records")
	require.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer")
	for _, auth := range []string{"Bearer wrong", "Basic " + token, token} {
		req, err := http.NewRequest(http.MethodGet, b.srv.URL+"/metrics", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, auth)
	}
	req, err := http.NewRequest(http.MethodGet, b.srv.URL+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(got), `unstuck_idempotency_records{exact="true",status="completed"} 1`)

	reg := prometheus.NewRegistry()
	elsewhere := setup(t, func(c *web.Config) { c.NoMetricsRoute, c.Registry = true, reg })
	resp, _ = do(t, client(t), http.MethodGet, elsewhere.srv.URL+"/metrics", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "not on the console's listener")
	families, err := reg.Gather()
	require.NoError(t, err)
	require.NotEmpty(t, families, "the caller's registry has the console's metrics to serve elsewhere")
}
