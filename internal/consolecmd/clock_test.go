package consolecmd

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// /readyz fails while the console's clock and its
// database's disagree by more than 30 s, either way; everything else, and
// /readyz when the skew cannot be measured (the database check reports
// that), goes to the console.
func TestReadyzFailsOnClockSkew(t *testing.T) {
	t.Parallel()
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ready\n") })
	for _, c := range []struct {
		name   string
		path   string
		skew   time.Duration
		err    error
		status int
		body   string
	}{
		{"ahead", "/readyz", 45 * time.Second, nil, http.StatusServiceUnavailable, "clock skew with the database 45s exceeds 30s\n"},
		{"behind", "/readyz", -10 * time.Minute, nil, http.StatusServiceUnavailable, "clock skew with the database -10m0s exceeds 30s\n"},
		{"within", "/readyz", 29 * time.Second, nil, http.StatusOK, "ready\n"},
		{"unmeasured", "/readyz", 0, errors.New("database down"), http.StatusOK, "ready\n"},
		{"other path", "/healthz", time.Hour, nil, http.StatusOK, "ready\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := readyClock(inner, func(context.Context) (time.Duration, error) { return c.skew, c.err }, slog.New(slog.DiscardHandler))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, c.path, nil))
			require.Equal(t, c.status, rec.Code)
			require.Equal(t, c.body, rec.Body.String())
		})
	}
}
