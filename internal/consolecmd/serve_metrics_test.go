package consolecmd

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServeMetricsAddrAndToken: /metrics need not be public on the
// console's listener. --metrics-addr moves it to a listener of its
// own, and UNSTUCK_METRICS_TOKEN makes it ask for a bearer token; a bad
// --trusted-proxies is a usage error.
func TestServeMetricsAddrAndToken(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "metrics.db")
	env := map[string]string{"UNSTUCK_DB": db, "UNSTUCK_SECRET": "serve-test-secret-0123456789abcdef", "UNSTUCK_METRICS_TOKEN": "tok-0123456789", "UNSTUCK_AUDIT_KEY": testAuditKey}
	_, errOut, err := runConsole(t, env, "serve", "--addr", "127.0.0.1:0", "--trusted-proxies", "10.0.0.0/8,not-an-address")
	require.ErrorIs(t, err, errUsage)
	require.Contains(t, errOut, "not-an-address")

	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--trusted-proxies", "10.0.0.0/8"},
			func(k string) string { return env[k] }, pw, io.Discard)
		_ = pw.Close()
	}()
	lines := bufio.NewReader(pr)
	line, err := lines.ReadString('\n')
	require.NoError(t, err)
	metricsURL, ok := strings.CutPrefix(strings.TrimSpace(line), "metrics on ")
	require.True(t, ok, line)
	line, err = lines.ReadString('\n')
	require.NoError(t, err)
	base, ok := strings.CutPrefix(strings.TrimSpace(line), "console listening on ")
	require.True(t, ok, line)
	go func() { _, _ = io.Copy(io.Discard, pr) }()

	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "not on the console's listener")
	resp, err = http.Get(metricsURL)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the token guards the metrics listener too")
	req, err := http.NewRequest(http.MethodGet, metricsURL, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer tok-0123456789")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "unstuck_idempotency_records")
	cancel()
	require.NoError(t, <-done)
}
