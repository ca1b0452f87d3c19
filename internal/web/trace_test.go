package web_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
)

// The key page shows the trace ID of the call that
// created or last took over the record, linked through --trace-url with
// the ID escaped into the template; without a template, the ID alone.
func TestKeyDetailLinksTheTrace(t *testing.T) {
	t.Parallel()
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	b := setup(t, func(c *web.Config) { c.TraceURL = "https://tempo.example.com/explore?trace={trace_id}&org=a" })
	rec, created, err := idemsqlite.New(b.sqlDB).Reserve(t.Context(), idemdriver.ReserveParams{
		Ident: idemdriver.Ident{Scope: "acme", Operation: "POST /charges", KeyDigest: idem.Digest("acme", "POST /charges", "traced")},
		Owner: "owner-token-0123456789abcdef0123", Lease: idem.DefaultLease, TTL: idem.DefaultTTL, TraceID: traceID})
	require.NoError(t, err)
	require.True(t, created)
	oncall := signIn(t, b, store.RoleOncall)
	resp, body := do(t, oncall, http.MethodGet, b.srv.URL+"/keys/"+itoa(rec.ID), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `data-copy="`+traceID+`"`)
	require.Contains(t, body, `href="https://tempo.example.com/explore?trace=`+traceID+`&amp;org=a"`, "the link, HTML-escaped")

	_, body = do(t, oncall, http.MethodGet, b.srv.URL+"/keys/"+itoa(b.keyID), nil)
	require.Regexp(t, `data-testid="trace">\s*—\s*</dd>`, body, "an untraced record: a dash")

	plain := setup(t)
	rec, _, err = idemsqlite.New(plain.sqlDB).Reserve(t.Context(), idemdriver.ReserveParams{
		Ident: idemdriver.Ident{Scope: "acme", Operation: "POST /charges", KeyDigest: idem.Digest("acme", "POST /charges", "traced")},
		Owner: "owner-token-0123456789abcdef0123", Lease: idem.DefaultLease, TTL: idem.DefaultTTL, TraceID: traceID})
	require.NoError(t, err)
	oncall = signIn(t, plain, store.RoleOncall)
	_, body = do(t, oncall, http.MethodGet, plain.srv.URL+"/keys/"+itoa(rec.ID), nil)
	require.Contains(t, body, `data-copy="`+traceID+`"`)
	require.NotContains(t, body, "Open trace", "no template: no link")
}

// ParseTraceURL accepts an absolute http(s) template with the
// placeholder and refuses everything else, naming the problem.
func TestParseTraceURL(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"", "https://tempo.example.com/trace/{trace_id}", "http://jaeger:16686/trace/{trace_id}?uiFind=x"} {
		got, err := web.ParseTraceURL(ok)
		require.NoError(t, err, ok)
		require.Equal(t, ok, got)
	}
	for bad, why := range map[string]string{
		"https://tempo.example.com/trace/":           "{trace_id}",
		"javascript:alert(1)//{trace_id}":            "http",
		"ftp://example.com/{trace_id}":               "http",
		"/trace/{trace_id}":                          "absolute",
		"https:///{trace_id}":                        "absolute",
		"https://exa mple.com/{trace_id}":            "not a URL",
		"data:text/html,<script>{trace_id}</script>": "http",
	} {
		_, err := web.ParseTraceURL(bad)
		require.ErrorContains(t, err, why, bad)
	}
}
