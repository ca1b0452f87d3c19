package web_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/store"
)

func TestOperationPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := signIn(t, b, store.RoleSupport)

	t.Run("list", func(t *testing.T) {
		resp, body := do(t, c, http.MethodGet, b.srv.URL+"/operations", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, body, `href="/operations/`+b.opID+`"`)
		require.Contains(t, body, "uncertain_unresolved: workspace: timeout after 5s", "why it stopped")
		require.Contains(t, body, `<a href="/operations" aria-current="page">Operations</a>`, "the nav marks the page")
		require.Contains(t, body, `<label for="status">Status</label>`, "every control is labelled")

		_, body = do(t, c, http.MethodGet, b.srv.URL+"/operations?status=review_required", nil)
		require.Contains(t, body, b.opID)
		require.Contains(t, body, `<option value="review_required" selected>`, "the filter stays in the form")
		_, body = do(t, c, http.MethodGet, b.srv.URL+"/operations?status=completed", nil)
		require.Contains(t, body, "No operations match")
		for _, q := range []url.Values{
			{"correlation_id": {"order-77"}},
			{"external_id": {"acct-881"}},
			{"type": {"signup"}, "from": {"2000-01-01T00:00"}},
		} {
			_, body = do(t, c, http.MethodGet, b.srv.URL+"/operations?"+q.Encode(), nil)
			require.Contains(t, body, b.opID, "%v", q)
		}
		_, body = do(t, c, http.MethodGet, b.srv.URL+"/operations?correlation_id=order-78", nil)
		require.Contains(t, body, "No operations match")
	})

	t.Run("bad filters", func(t *testing.T) {
		resp, body := do(t, c, http.MethodGet, b.srv.URL+"/operations?status=stuck", nil)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		require.Contains(t, body, `Unknown status &#34;stuck&#34;`)
		require.Contains(t, body, `data-field="status"`)
		resp, body = do(t, c, http.MethodGet, b.srv.URL+"/operations?to=tomorrow", nil)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		require.Contains(t, body, `data-field="to"`)
		resp, body = do(t, c, http.MethodGet, b.srv.URL+"/operations?after=garbage", nil)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		require.Contains(t, body, "The page link is not valid")
	})

	t.Run("htmx gets only the results", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodGet, b.srv.URL+"/operations?status=review_required&live=1", nil)
		require.NoError(t, err)
		req.Header.Set("HX-Request", "true")
		resp, err := c.Do(req)
		require.NoError(t, err)
		frag, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.NotContains(t, string(frag), "<html")
		require.NotContains(t, string(frag), "<form")
		require.Contains(t, string(frag), `id="results"`)
		require.Contains(t, string(frag), `hx-trigger="every 5s"`, "live refresh polls")
		require.Contains(t, string(frag), b.opID)
	})

	t.Run("detail", func(t *testing.T) {
		resp, body := do(t, c, http.MethodGet, b.srv.URL+"/operations/"+b.opID, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		for _, want := range []string{
			`data-testid="review"`, "Needs a human", "neither done nor rolled back", "uncertain_unresolved",
			"order-77", `href="/operations?correlation_id=order-77"`, // correlation, and the list of its operations
			b.opID + "/account", b.opID + "/workspace/compensate", // step and compensation keys
			"acct-881", `aria-label="Copy external ID of account"`, // external ID with a copy button
			"2 / 5", "3 verifications", "(uncertain)", // attempts, verifications, error class
			`data-testid="timeline"`, "step_uncertain", "running → uncertain", "verification could not resolve step workspace",
			"Reconciliation found no difference",
		} {
			require.Contains(t, body, want)
		}
		require.NotContains(t, body, "ann@example.com", "support does not see the input")
		require.Contains(t, body, "Your role may not see the inputs and step results of operations.")
		require.Less(t, strings.Index(body, ">started<"), strings.Index(body, ">step_uncertain<"), "timeline oldest first")
		require.NotContains(t, body, "style=", "no inline style (CSP)")
		require.NotRegexp(t, `\son[a-z]+=`, body, "no inline event handlers (CSP)")
	})

	t.Run("not found", func(t *testing.T) {
		for _, path := range []string{"/operations/no-such-operation", "/operations/" + strings.Repeat("x", 600)} {
			resp, body := do(t, c, http.MethodGet, b.srv.URL+path, nil)
			require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
			require.Contains(t, body, "There is no operation with this ID.")
		}
	})

	t.Run("overview", func(t *testing.T) {
		resp, body := do(t, c, http.MethodGet, b.srv.URL+"/", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, body, `href="/operations?status=review_required"`)
		require.Regexp(t, `data-testid="op-count-review_required">\s*1\s*<`, body)
		require.Regexp(t, `data-testid="op-count-running">\s*0\s*<`, body)
		attention := body[strings.Index(body, `id="attention-title"`):]
		review, keys := strings.Index(attention, b.opID), strings.Index(attention, "Keys</h3>")
		require.GreaterOrEqual(t, review, 0, "the operation under review needs a human")
		require.True(t, keys < 0 || review < keys, "review_required comes first")
	})
}
