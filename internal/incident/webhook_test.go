package incident_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/incident"
	"github.com/unstuckhq/unstuck/internal/outbound"
	"github.com/unstuckhq/unstuck/internal/store"
)

// A new group is posted as Slack-compatible JSON, with
// its pattern and never a record's own message.
func TestWebhook(t *testing.T) {
	t.Parallel()
	got := make(chan map[string]string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "application/json", r.Header.Get("Content-Type"))
		var body map[string]string
		require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
		got <- body
	}))
	defer srv.Close()
	groups := []store.IncidentGroup{{Key: "aaaaaaaaaaaaaaaaaaaaaaaa", Kind: "key", State: "pending", Operation: "POST /signups",
		Message: "mailbox <email> does not exist", Sample: "mailbox bob+17@example.com does not exist", Count: 3, Exact: true},
		{Key: "bbbbbbbbbbbbbbbbbbbbbbbb", Kind: "operation", State: "review_required", Operation: "signup", Step: "workspace",
			System: "workspace-api", Message: "timeout after <n>s", Count: 10000, Exact: false}}
	incident.Webhook(srv.URL, "https://console.example.com/", srv.Client(), slog.New(slog.DiscardHandler))(context.Background(), groups)
	body := <-got
	require.Equal(t, "*unstuck: 2 new incident groups*\n"+
		"• 3 key pending: POST /signups — mailbox &lt;email&gt; does not exist <https://console.example.com/incidents/aaaaaaaaaaaaaaaaaaaaaaaa|open>\n"+
		"• ≥ 10000 operation review_required: signup · step workspace · workspace-api — timeout after &lt;n&gt;s <https://console.example.com/incidents/bbbbbbbbbbbbbbbbbbbbbbbb|open>",
		body["text"])
	require.NotContains(t, body["text"], "bob+17")

	// Many groups: ten lines, then how many more.
	many := make([]store.IncidentGroup, 12)
	for i := range many {
		many[i] = groups[0]
	}
	text := string(incident.WebhookMessage(many, ""))
	require.Equal(t, 10, strings.Count(text, "•"))
	require.Contains(t, text, "and 2 more")
}

// A failing hook is logged without its URL (it holds the token).
func TestWebhookFailureHidesURL(t *testing.T) {
	t.Parallel()
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	hook := "http://127.0.0.1:1/services/T000/B000/secret-token"
	incident.Webhook(hook, "", http.DefaultClient, log)(context.Background(), []store.IncidentGroup{{Key: "x", Count: 1, Exact: true}})
	require.Contains(t, logs.String(), "incident webhook failed")
	require.NotContains(t, logs.String(), "secret-token")
	require.NoError(t, outbound.CheckURL("https://hooks.slack.com/services/x"))
	require.Error(t, outbound.CheckURL("hooks.slack.com/x"))
}
