package web_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/store"
)

// A page not found keeps a signed-in viewer's navigation and search, and
// every error page says what to do next.
func TestErrorPagesOfferTheWayOn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	support := signIn(t, b, store.RoleSupport)
	resp, body := do(t, support, http.MethodGet, b.srv.URL+"/no-such-page", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Contains(t, body, `<nav aria-label="Main">`, "the navigation")
	require.Contains(t, body, `action="/search"`, "a search")
	require.Contains(t, body, `data-testid="next-step"`, "the next step")
	resp, body = do(t, support, http.MethodGet, b.srv.URL+"/users", nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, body, "ask an administrator", "the next step of a 403")
}
