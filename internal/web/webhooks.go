package web

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/views"
)

// WebhookLog reads the decision webhooks' delivery log (a *store.DB); the
// relay of package webhook writes it.
type WebhookLog interface {
	WebhookDeliveries(ctx context.Context, status string, limit int) ([]store.WebhookDelivery, error)
	CountWebhookDeliveries(ctx context.Context, status string) (int64, error)
}

// webhookPage is how many deliveries /webhooks lists.
const webhookPage = 200

// webhooksOnKey is the context key that says the console relays decision
// webhooks, for the navigation's link.
type webhooksOnKey struct{}

func withWebhooks(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), webhooksOnKey{}, true)))
	})
}

func webhooksOn(ctx context.Context) bool {
	on, _ := ctx.Value(webhooksOnKey{}).(bool)
	return on
}

// handleWebhooks lists the most recent deliveries, ?status= narrowing
// them, and counts the ones given up.
func handleWebhooks(hooks WebhookLog, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vm := views.WebhooksVM{Status: r.URL.Query().Get("status")}
		switch vm.Status {
		case "", store.WebhookPending, store.WebhookDelivered, store.WebhookFailed:
		default:
			writeError(w, r, log, appError(EInvalid, "Show all, pending, delivered or failed deliveries."))
			return
		}
		list, err := hooks.WebhookDeliveries(r.Context(), vm.Status, webhookPage)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		if vm.Failed, err = hooks.CountWebhookDeliveries(r.Context(), store.WebhookFailed); err != nil {
			writeError(w, r, log, err)
			return
		}
		for _, d := range list {
			vm.Rows = append(vm.Rows, views.WebhookRow{Endpoint: d.Endpoint, EventID: d.EventID,
				AuditURL: "/audit?after=" + strconv.FormatInt(d.Seq+1, 10), Status: d.Status, Attempts: d.Attempts,
				LastError: d.LastError, NextAt: d.NextAttemptAt, UpdatedAt: d.UpdatedAt})
		}
		page := pageFor(r, "Webhook deliveries", "webhooks")
		page.Results = true
		render(w, r, http.StatusOK, page, views.Webhooks(page, vm))
	})
}
