package web_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/store"
)

// TestWebhooksPage: the delivery log lists deliveries with their status,
// attempts and last error, counts the given-up ones, and is linked from
// the navigation of the roles that may read it.
func TestWebhooksPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	at := time.Now().UTC()
	require.NoError(t, b.db.SaveWebhookDelivery(ctx, store.WebhookDelivery{EndpointKey: "k", Endpoint: "https://hooks.example/in",
		Seq: 41, EventID: "dec_41", EventTime: at, Status: store.WebhookFailed, Attempts: 10, LastStatus: 503, LastError: "HTTP 503"}))
	require.NoError(t, b.db.SaveWebhookDelivery(ctx, store.WebhookDelivery{EndpointKey: "k", Endpoint: "https://hooks.example/in",
		Seq: 42, EventID: "dec_42", EventTime: at, Status: store.WebhookDelivered, Attempts: 1, LastStatus: 200, DeliveredAt: at}))

	admin := signIn(t, b, store.RoleAdmin)
	resp, body := do(t, admin, http.MethodGet, b.srv.URL+"/webhooks", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `href="/webhooks"`, "the navigation links the log")
	require.Contains(t, body, "1 given up")
	require.Contains(t, body, "dec_41")
	require.Contains(t, body, "HTTP 503")
	require.Contains(t, body, "dec_42")
	require.Contains(t, body, `href="/audit?after=42"`, "the event's audit entry")
	_, body = do(t, admin, http.MethodGet, b.srv.URL+"/webhooks?status=delivered", nil)
	require.Contains(t, body, "dec_42")
	require.NotContains(t, body, "HTTP 503")
	resp, _ = do(t, admin, http.MethodGet, b.srv.URL+"/webhooks?status=lost", nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)

	_, body = do(t, signIn(t, b, store.RoleOncall), http.MethodGet, b.srv.URL+"/webhooks", nil)
	require.Contains(t, body, "dec_41")
	require.NotContains(t, body, `href="/audit?after=42"`, "oncall may not read the audit trail")
	_, body = do(t, signIn(t, b, store.RoleSupport), http.MethodGet, b.srv.URL+"/", nil)
	require.NotContains(t, body, `href="/webhooks"`, "support may not read the log")
}
