package consolecmd

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
)

// A bad incident flag is a usage error naming the flag.
func TestIncidentFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ flag, value string }{
		{"--incident-webhook", "hooks.example.com/x"},
		{"--console-url", "ftp://console"},
		{"--snapshot-every", "10ms"},
	} {
		var stderr bytes.Buffer
		err := run(context.Background(), []string{"demo", tc.flag, tc.value}, func(string) string { return "" }, io.Discard, &stderr)
		require.ErrorIs(t, err, errUsage, tc.flag)
		require.Contains(t, stderr.String(), tc.flag)
	}
}

// The demo's traffic makes new incident groups, and the
// console posts them to the webhook as Slack-compatible JSON.
func TestDemoPostsNewIncidents(t *testing.T) {
	t.Parallel()
	got := make(chan string, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Text string }
		if json.NewDecoder(r.Body).Decode(&body) == nil {
			got <- body.Text
		}
	}))
	defer hook.Close()
	base, _ := consoletest.StartDemoWith(t, run, "sqlite:"+filepath.Join(t.TempDir(), "webhook.db"), "--traffic", "--snapshot-every", "1s",
		"--incident-webhook", hook.URL+"/services/T/B/token", "--console-url", "https://console.example.com")
	consoletest.WaitReady(t, base)
	select {
	case text := <-got:
		require.Contains(t, text, "new incident group")
		require.Regexp(t, `<https://console\.example\.com/incidents/[0-9a-f]{24}\|open>`, text)
	case <-time.After(60 * time.Second):
		t.Fatal("no webhook post in 60 s of demo traffic")
	}
}
