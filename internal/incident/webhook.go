package incident

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/unstuckhq/unstuck/internal/store"
)

// webhookMaxGroups bounds the groups one notification lists.
const webhookMaxGroups = 10

// CheckWebhookURL validates a webhook or console address: an absolute
// http or https URL.
func CheckWebhookURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("not an absolute http(s) URL")
	}
	return nil
}

// WebhookMessage is the Slack-compatible body of a notification of new
// groups: {"text": …} in Slack's mrkdwn, one line per group (at most 10,
// then how many more) with its count, state, operation (and step and
// system) and normalized message, never a sample message: patterns carry
// no e-mail address, ID or number of the records. consoleURL, when set,
// adds the link to each group's page.
func WebhookMessage(groups []store.IncidentGroup, consoleURL string) []byte {
	esc := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace
	var b strings.Builder
	b.WriteString("*unstuck: " + strconv.Itoa(len(groups)) + " new incident group")
	if len(groups) != 1 {
		b.WriteString("s")
	}
	b.WriteString("*")
	for i, g := range groups {
		if i == webhookMaxGroups {
			b.WriteString("\n… and " + strconv.Itoa(len(groups)-i) + " more")
			break
		}
		count := strconv.FormatInt(g.Count, 10)
		if !g.Exact {
			count = "≥ " + count
		}
		where := g.Operation
		if g.Step != "" {
			where += " · step " + g.Step
		}
		if g.System != "" {
			where += " · " + g.System
		}
		b.WriteString("\n• " + count + " " + g.Kind + " " + g.State + ": " + esc(where) + " — " + esc(g.Message))
		if consoleURL != "" {
			b.WriteString(" <" + strings.TrimSuffix(consoleURL, "/") + "/incidents/" + g.Key + "|open>")
		}
	}
	body, _ := json.Marshal(map[string]string{"text": b.String()}) // a map of strings always marshals
	return body
}

// Webhook returns an OnNewGroups for a [Snapshotter] that posts
// [WebhookMessage] to hook (Slack's incoming webhooks, or anything that
// takes the same JSON) with client, within 10 s. A failure is logged
// without the hook's URL, which holds its token, and not retried: the
// alert rules on unstuck_incident_groups are the dependable path.
func Webhook(hook, consoleURL string, client *http.Client, log *slog.Logger) func(context.Context, []store.IncidentGroup) {
	return func(ctx context.Context, groups []store.IncidentGroup) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook, bytes.NewReader(WebhookMessage(groups, consoleURL)))
		if err != nil {
			log.Error("incident webhook: bad request", "error", "invalid webhook URL")
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			log.Error("incident webhook failed", "groups", len(groups), "error", redactURLError(err))
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 300 {
			log.Error("incident webhook refused", "groups", len(groups), "status", resp.StatusCode)
		}
	}
}

// redactURLError keeps an HTTP client error's cause without its URL.
func redactURLError(err error) string {
	if ue, ok := err.(*url.Error); ok {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}
