package idem_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemtest"
)

// TestH5ScopeThatCannotBeStoredIs400 checks that a scope a store cannot
// keep (invalid UTF-8 or NUL, which PostgreSQL's text refuses, or over 255
// bytes) is the caller's error: 400 invalid_idempotency_scope before the
// store is touched, never 503 store unavailable (SPEC H5,
// H16).
func TestH5ScopeThatCannotBeStoredIs400(t *testing.T) {
	t.Parallel()
	inner, _ := newSQLiteStore(t)
	s := &countingStore{Store: inner}
	e, err := idem.New(s, idem.Config{Secret: idemtest.Secret})
	require.NoError(t, err)
	mw, err := idem.NewMiddleware(e, idem.MiddlewareConfig{})
	require.NoError(t, err)
	ran := 0
	h := mw.Required(nil)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		ran++
		w.WriteHeader(http.StatusCreated)
	}))
	post := func(principal string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", `"scope-test-key-0001"`)
		req = req.WithContext(idem.ContextWithPrincipal(req.Context(), "demo", principal))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for name, principal := range map[string]string{
		"invalid UTF-8": "caf\xe9",
		"NUL":           "a\x00b",
		"too long":      strings.Repeat("p", idem.MaxScopeBytes),
	} {
		rec := post(principal)
		require.Equal(t, http.StatusBadRequest, rec.Code, "%s: %s", name, rec.Body.String())
		require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"), name)
		var p idem.Problem
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p), name)
		require.Equal(t, idem.CodeInvalidScope, p.Code, name)
	}
	require.Zero(t, ran, "the handler never runs")
	require.Zero(t, s.calls.Load(), "the store is never touched")

	// A valid UTF-8 scope still works.
	rec := post("café")
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	require.Equal(t, 1, ran)
}
