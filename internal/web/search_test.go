package web_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
)

// syncBuffer is a log sink the handler may write from several goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestSearch: the header's search box (SPEC K11) finds a raw key quoted as
// the header sends it or bare, without its scope and operation; a record
// ID; an operation ID; a correlation ID. One match is a 303 to its page;
// none says so; bad input is a 400 naming the field. The raw key is in no
// URL, log line or audit entry.
func TestSearch(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	b := setup(t, func(c *web.Config) {
		c.Log = slog.New(slog.NewTextHandler(io.MultiWriter(io.Discard, logs), &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	const raw = "web-test-key-000001"
	for _, role := range roles {
		c := signIn(t, b, role)
		for _, q := range []string{`"` + raw + `"`, raw, "  " + raw + " "} {
			resp, body := do(t, c, http.MethodPost, b.srv.URL+"/search", url.Values{"q": {q}})
			require.Equal(t, http.StatusSeeOther, resp.StatusCode, "%s searches %q: %s", role, q, body)
			require.Equal(t, "/keys/"+itoa(b.keyID), resp.Header.Get("Location"), "%s searches %q", role, q)
		}
	}
	c := signIn(t, b, store.RoleSupport)
	rec, ok, err := b.records.KeyByID(context.Background(), b.keyID)
	require.NoError(t, err)
	require.True(t, ok)
	for q, want := range map[string]string{
		// The digest, the short key ID of a log line (idem.SafeKeyID), in
		// either case, and a longer prefix.
		rec.KeyDigest:                                  "/keys/" + itoa(b.keyID),
		idem.SafeKeyID(rec.KeyDigest):                  "/keys/" + itoa(b.keyID),
		strings.ToUpper(idem.SafeKeyID(rec.KeyDigest)): "/keys/" + itoa(b.keyID),
		rec.KeyDigest[:20]:                             "/keys/" + itoa(b.keyID),
		itoa(b.keyID):                                  "/keys/" + itoa(b.keyID),
		b.opID:                                         "/operations/" + b.opID,
		"order-77":                                     "/operations/" + b.opID, // the operation's correlation ID
		`"` + b.opID + `"`:                             "/operations/" + b.opID,
		"#" + itoa(b.keyID):                            "/keys/" + itoa(b.keyID),
	} {
		resp, body := do(t, c, http.MethodPost, b.srv.URL+"/search", url.Values{"q": {q}})
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "search %q: %s", q, body)
		require.Equal(t, want, resp.Header.Get("Location"), "search %q", q)
	}

	// Too short to be a short key ID: not a digest look-up, nothing found.
	resp, body := do(t, c, http.MethodPost, b.srv.URL+"/search", url.Values{"q": {rec.KeyDigest[:11]}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "Nothing matches")
	_, body = do(t, c, http.MethodGet, b.srv.URL+"/keys/"+itoa(b.keyID), nil)
	require.Contains(t, body, idem.SafeKeyID(rec.KeyDigest), "the key page shows the short key ID logs carry")

	resp, body = do(t, c, http.MethodPost, b.srv.URL+"/search", url.Values{"q": {`"no-such-key-000000"`}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "Nothing matches")
	require.Contains(t, body, "not found by their raw key", "the page says records before the key hash are not found")

	for _, q := range []string{"", "   ", strings.Repeat("k", 301), "bad\x00nul", "\xff\xfe"} {
		resp, body := do(t, c, http.MethodPost, b.srv.URL+"/search", url.Values{"q": {q}})
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "search %q", q)
		require.Contains(t, body, `data-field="q"`, "search %q", q)
		require.Contains(t, body, `aria-invalid="true"`, "search %q", q)
	}
	// The page without a POST is the search form, whatever the URL says.
	resp, body = do(t, c, http.MethodGet, b.srv.URL+"/search?q="+url.QueryEscape(raw), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotContains(t, body, raw, "a raw key in a URL is not used")

	// Every signed-in page has the search landmark, which posts.
	_, body = do(t, c, http.MethodGet, b.srv.URL+"/", nil)
	require.Contains(t, body, `role="search" method="post" action="/search"`)
	require.Contains(t, body, `aria-label="Search"`)

	// The raw key reached no log line and no audit entry.
	require.NotContains(t, logs.String(), raw)
	entries, _, err := b.trail.List(context.Background(), audit.Filter{Limit: audit.MaxLimit})
	require.NoError(t, err)
	for _, e := range entries {
		require.NotContains(t, e.Reason+e.TargetID+e.Action+string(e.Before)+string(e.After), raw)
	}
}
