package incident

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/unstuckhq/unstuck/internal/outbound"
	"github.com/unstuckhq/unstuck/internal/store"
)

// webhookMaxGroups bounds the groups one notification lists.
const webhookMaxGroups = 10

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
	header := http.Header{"Content-Type": {"application/json"}}
	return func(ctx context.Context, groups []store.IncidentGroup) {
		status, err := outbound.Post(ctx, client, hook, header, WebhookMessage(groups, consoleURL), 10*time.Second)
		switch {
		case errors.Is(err, outbound.ErrBadURL):
			log.Error("incident webhook: bad request", "error", err.Error())
		case err != nil:
			log.Error("incident webhook failed", "groups", len(groups), "error", err.Error())
		case status >= 300:
			log.Error("incident webhook refused", "groups", len(groups), "status", status)
		}
	}
}
