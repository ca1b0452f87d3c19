package consolecmd

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWebhookFlags: a decision webhook needs a valid URL and a signing
// secret of at least 32 bytes from the environment; the flag replaces the
// environment's list, and help never shows a URL's token.
func TestWebhookFlags(t *testing.T) {
	t.Parallel()
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	serve := func(getenv func(string) string, args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"serve", "--db", "sqlite::memory:"}, args...), getenv, &stdout, &stderr)
		return stderr.String(), err
	}
	msg, err := serve(env(nil), "--decision-webhook-url", "https://hooks.example/a")
	require.ErrorIs(t, err, errUsage)
	require.Contains(t, msg, "UNSTUCK_DECISION_WEBHOOK_SECRET")
	msg, err = serve(env(map[string]string{"UNSTUCK_DECISION_WEBHOOK_SECRET": "short"}), "--decision-webhook-url", "https://hooks.example/a")
	require.ErrorIs(t, err, errUsage)
	require.Contains(t, msg, "at least 32 bytes")
	msg, err = serve(env(map[string]string{"UNSTUCK_DECISION_WEBHOOK_URLS": "hooks.example/x?token=s3cret"}))
	require.ErrorIs(t, err, errUsage)
	require.Contains(t, msg, "--decision-webhook-url")
	require.NotContains(t, msg, "s3cret")

	fs := newTestFlagSet()
	f := addWebhookFlags(fs, env(map[string]string{"UNSTUCK_DECISION_WEBHOOK_URLS": "https://a.example/x, https://b.example/y?token=s3cret"}))
	require.Equal(t, []string{"https://a.example/x", "https://b.example/y?token=s3cret"}, f.urls.urls)
	require.Equal(t, "https://a.example/x,https://b.example/y", f.urls.String())
	require.NoError(t, fs.Parse([]string{"--decision-webhook-url", "https://c.example/1,https://d.example/2", "--decision-webhook-url", "https://e.example/3"}))
	require.Equal(t, []string{"https://c.example/1", "https://d.example/2", "https://e.example/3"}, f.urls.urls, "flags replace the environment's list")
	cfg, ok, err := f.config(env(map[string]string{"UNSTUCK_DECISION_WEBHOOK_SECRET": "0123456789abcdef0123456789abcdef"}))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 10, cfg.MaxAttempts)
	require.Len(t, cfg.Endpoints, 3)
}

func newTestFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// TestWebhookServe: serve with a webhook URL runs the relay (its metrics
// are on /metrics) and refuses one with decision events off.
func TestWebhookServe(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "webhooks.db")
	env := map[string]string{"UNSTUCK_DB": db, "UNSTUCK_SECRET": "serve-test-secret-0123456789abcdef", "UNSTUCK_AUDIT_KEY": testAuditKey,
		"UNSTUCK_DECISION_WEBHOOK_URLS": "http://127.0.0.1:9/hook", "UNSTUCK_DECISION_WEBHOOK_SECRET": "webhook-secret-0123456789abcdef0123"}
	_, _, err := runConsole(t, env, "serve", "--addr", "127.0.0.1:0", "--decision-events=false")
	require.ErrorContains(t, err, "needs decision events")

	base, stop := startServe(t, env)
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(body), `unstuck_decision_webhook_deliveries_total{outcome="failed"} 0`)
	require.Contains(t, string(body), "unstuck_decision_webhook_oldest_undelivered_seconds")
	stop()
}
