package web_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/store"
)

// The operation page refreshes its live part only while the operation
// moves or right after a decision; HTMX gets the fragment "live" alone,
// and a refresh that finds the operation under review stops.
func TestOperationPageLive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := signIn(t, b, store.RoleSupport)
	page := b.srv.URL + "/operations/" + b.opID

	_, body := do(t, c, http.MethodGet, page, nil)
	require.Contains(t, body, `<div id="live" data-status="review_required">`, "under review: the live part does not refresh")
	require.NotContains(t, body, "data-pause-live")

	_, body = do(t, c, http.MethodGet, page+"?done=retry", nil)
	require.Contains(t, body, `hx-get="/operations/`+b.opID+`?done=retry" hx-trigger="every 2s" hx-select="#live"`, "right after a decision: it refreshes")
	require.Contains(t, body, "data-pause-live", "with a Pause button")
	require.NotContains(t, body, `id="live" aria-live`, "not itself a live region")

	req, err := http.NewRequest(http.MethodGet, page+"?done=retry", nil)
	require.NoError(t, err)
	req.Header.Set("HX-Request", "true")
	resp, err := c.Do(req)
	require.NoError(t, err)
	frag, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotContains(t, string(frag), "<html")
	require.NotContains(t, string(frag), "← Operations", "only the live part")
	require.Contains(t, string(frag), `<div id="live" data-status="review_required">`, "a refresh under review stops refreshing")
	require.Contains(t, string(frag), "Needs a human")

	_, body = do(t, c, http.MethodGet, page+"?done=retry&data=show", nil)
	require.NotContains(t, body, `hx-trigger="every 2s"`, "a page showing the audited data does not refresh")
}
