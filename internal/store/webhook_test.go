package store

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWebhookDeliveryLog(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := t.Context()
		_, ok, err := b.db.WebhookCursor(ctx, "k1")
		require.NoError(t, err)
		require.False(t, ok)
		require.NoError(t, b.db.SetWebhookCursor(ctx, "k1", "https://hooks.example/a", 4))
		require.NoError(t, b.db.SetWebhookCursor(ctx, "k1", "https://hooks.example/a", 7))
		seq, ok, err := b.db.WebhookCursor(ctx, "k1")
		require.NoError(t, err)
		require.True(t, ok)
		require.EqualValues(t, 7, seq)

		at := time.Now().UTC().Truncate(time.Microsecond)
		w := WebhookDelivery{EndpointKey: "k1", Endpoint: "https://hooks.example/a", Seq: 8, EventID: "dec_8", EventTime: at,
			Status: WebhookPending, Attempts: 1, LastStatus: 500, LastError: "HTTP 500", NextAttemptAt: at.Add(time.Second)}
		require.NoError(t, b.db.SaveWebhookDelivery(ctx, w))
		got, ok, err := b.db.WebhookDeliveryOf(ctx, "k1", 8)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, w.NextAttemptAt, got.NextAttemptAt)
		require.True(t, got.DeliveredAt.IsZero())
		got.UpdatedAt, w.UpdatedAt = time.Time{}, time.Time{}
		require.Equal(t, w, got)

		w.Status, w.Attempts, w.LastStatus, w.LastError, w.NextAttemptAt, w.DeliveredAt = WebhookDelivered, 2, 204, "", time.Time{}, at
		require.NoError(t, b.db.SaveWebhookDelivery(ctx, w))
		require.NoError(t, b.db.SaveWebhookDelivery(ctx, WebhookDelivery{EndpointKey: "k1", Endpoint: "https://hooks.example/a",
			Seq: 9, EventID: "dec_9", EventTime: at, Status: WebhookFailed, Attempts: 10, LastError: "connection refused"}))
		require.Error(t, b.db.SaveWebhookDelivery(ctx, WebhookDelivery{EndpointKey: "k1", Seq: 10, Status: "lost"}))

		all, err := b.db.WebhookDeliveries(ctx, "", 10)
		require.NoError(t, err)
		require.Len(t, all, 2)
		failed, err := b.db.WebhookDeliveries(ctx, WebhookFailed, 10)
		require.NoError(t, err)
		require.Len(t, failed, 1)
		require.Equal(t, "dec_9", failed[0].EventID)
		n, err := b.db.CountWebhookDeliveries(ctx, WebhookFailed)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		n, err = b.db.CountWebhookDeliveries(ctx, WebhookDelivered)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)

		// Pruning keeps pending deliveries and recent ones.
		require.NoError(t, b.db.SaveWebhookDelivery(ctx, WebhookDelivery{EndpointKey: "k1", Endpoint: "https://hooks.example/a",
			Seq: 10, EventID: "dec_10", EventTime: at, Status: WebhookPending, Attempts: 1, NextAttemptAt: at}))
		n, err = b.db.DeleteOldWebhookDeliveries(ctx, time.Now().Add(-time.Hour))
		require.NoError(t, err)
		require.Zero(t, n)
		n, err = b.db.DeleteOldWebhookDeliveries(ctx, time.Now().Add(time.Hour))
		require.NoError(t, err)
		require.EqualValues(t, 2, n, "delivered and failed")
		_, ok, err = b.db.WebhookDeliveryOf(ctx, "k1", 10)
		require.NoError(t, err)
		require.True(t, ok, "pending stays")

		// 011 goes down and up again.
		down, err := migrations.ReadFile("migration/" + b.db.Dialect() + "/011_webhook.down.sql")
		require.NoError(t, err)
		up, err := migrations.ReadFile("migration/" + b.db.Dialect() + "/011_webhook.up.sql")
		require.NoError(t, err)
		webhookExecScript(t, b, string(down))
		_, err = b.db.CountWebhookDeliveries(ctx, WebhookFailed)
		require.Error(t, err, "the table is gone")
		webhookExecScript(t, b, string(up))
		webhookExecScript(t, b, string(up)) // safe to run again
		n, err = b.db.CountWebhookDeliveries(ctx, WebhookFailed)
		require.NoError(t, err)
		require.Zero(t, n)
	})
}

// webhookExecScript runs a migration file's statements one by one.
func webhookExecScript(t *testing.T, b testBundle, script string) {
	t.Helper()
	ctx := context.Background()
	for _, stmt := range splitWebhookSQL(script) {
		var err error
		if b.pool != nil {
			_, err = b.pool.Exec(ctx, stmt)
		} else {
			_, err = b.sqlDB.ExecContext(ctx, stmt)
		}
		require.NoError(t, err, stmt)
	}
}

// splitWebhookSQL splits a script without semicolons in strings or
// comments (as 011's) into statements, comment lines dropped.
func splitWebhookSQL(script string) []string {
	var out []string
	var cur []byte
	for _, line := range strings.Split(script, "\n") {
		if len(line) >= 2 && line[:2] == "--" {
			continue
		}
		cur = append(cur, line...)
		cur = append(cur, '\n')
		if len(line) > 0 && line[len(line)-1] == ';' {
			out = append(out, string(cur))
			cur = nil
		}
	}
	return out
}
