package store

// The decision webhooks' cursor and delivery log (SPEC K26): the tables
// of migration 011, written by the relay (internal/webhook) and read by
// the /webhooks page.

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The statuses of a webhook delivery.
const (
	WebhookPending   = "pending"
	WebhookDelivered = "delivered"
	WebhookFailed    = "failed"
)

// WebhookDelivery is one event's delivery to one endpoint.
type WebhookDelivery struct {
	// EndpointKey names the endpoint (a hash of its URL); Endpoint shows
	// it, without credentials, query or fragment.
	EndpointKey string
	Endpoint    string
	// Seq is the event's audit entry; EventID the event's ID.
	Seq       int64
	EventID   string
	EventTime time.Time
	// Status is WebhookPending, WebhookDelivered or WebhookFailed.
	Status   string
	Attempts int
	// LastStatus is the last attempt's HTTP status (0: no response);
	// LastError its failure, without URL or response body.
	LastStatus    int
	LastError     string
	NextAttemptAt time.Time // zero unless pending
	DeliveredAt   time.Time // zero unless delivered
	UpdatedAt     time.Time
}

const webhookDeliveryColumns = `endpoint_key, endpoint, seq, event_id, event_time, status, attempts, last_status, last_error,
next_attempt_at, delivered_at, updated_at`

func scanWebhookDelivery(scan func(...any) error) (WebhookDelivery, error) {
	var w WebhookDelivery
	var eventTime, next, delivered, updated anyTime
	var attempts, last int64
	err := scan(&w.EndpointKey, &w.Endpoint, &w.Seq, &w.EventID, &eventTime, &w.Status, &attempts, &last, &w.LastError,
		&next, &delivered, &updated)
	w.EventTime, w.NextAttemptAt, w.DeliveredAt, w.UpdatedAt = eventTime.t, next.t, delivered.t, updated.t
	w.Attempts, w.LastStatus = int(attempts), int(last)
	return w, err
}

// WebhookCursor returns the seq the relay is done with for the endpoint
// key; ok is false before the endpoint's first cursor.
func (d *DB) WebhookCursor(ctx context.Context, key string) (seq int64, ok bool, err error) {
	err = bulkConn{d}.each(ctx, `SELECT seq FROM unstuck_console_webhook_cursor WHERE endpoint_key = $1`, []any{key},
		func(scan func(...any) error) error {
			ok = true
			return scan(&seq)
		})
	return seq, ok, wrapBulk("read webhook cursor", err)
}

// SetWebhookCursor sets the endpoint's cursor to seq.
func (d *DB) SetWebhookCursor(ctx context.Context, key, endpoint string, seq int64) error {
	c := bulkConn{d}
	now := c.ts(time.Now())
	n, err := c.exec(ctx, `UPDATE unstuck_console_webhook_cursor SET seq = $1, endpoint = $2, updated_at = $3 WHERE endpoint_key = $4`,
		seq, endpoint, now, key)
	if err == nil && n == 0 {
		_, err = c.exec(ctx, `INSERT INTO unstuck_console_webhook_cursor (endpoint_key, endpoint, seq, updated_at) VALUES ($1, $2, $3, $4)`,
			key, endpoint, seq, now)
	}
	return wrapBulk("write webhook cursor", err)
}

// WebhookDeliveryOf returns the delivery of the event at seq to the
// endpoint key, ok false when none was tried.
func (d *DB) WebhookDeliveryOf(ctx context.Context, key string, seq int64) (w WebhookDelivery, ok bool, err error) {
	err = bulkConn{d}.each(ctx, `SELECT `+webhookDeliveryColumns+` FROM unstuck_console_webhook_delivery WHERE endpoint_key = $1 AND seq = $2`,
		[]any{key, seq}, func(scan func(...any) error) error {
			ok = true
			w, err = scanWebhookDelivery(scan)
			return err
		})
	return w, ok, wrapBulk("read webhook delivery", err)
}

// SaveWebhookDelivery writes w, a new delivery or the next state of one;
// its UpdatedAt is now.
func (d *DB) SaveWebhookDelivery(ctx context.Context, w WebhookDelivery) error {
	switch w.Status {
	case WebhookPending, WebhookDelivered, WebhookFailed:
	default:
		return invalid("status", fmt.Sprintf("unknown webhook delivery status %q", w.Status))
	}
	c := bulkConn{d}
	now := c.ts(time.Now())
	n, err := c.exec(ctx, `UPDATE unstuck_console_webhook_delivery SET status = $1, attempts = $2, last_status = $3, last_error = $4,
next_attempt_at = $5, delivered_at = $6, updated_at = $7 WHERE endpoint_key = $8 AND seq = $9`,
		w.Status, w.Attempts, w.LastStatus, w.LastError, c.ts(w.NextAttemptAt), c.ts(w.DeliveredAt), now, w.EndpointKey, w.Seq)
	if err == nil && n == 0 {
		_, err = c.exec(ctx, `INSERT INTO unstuck_console_webhook_delivery (`+webhookDeliveryColumns+`)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			w.EndpointKey, w.Endpoint, w.Seq, w.EventID, c.ts(w.EventTime), w.Status, w.Attempts, w.LastStatus, w.LastError,
			c.ts(w.NextAttemptAt), c.ts(w.DeliveredAt), now)
	}
	return wrapBulk("write webhook delivery", err)
}

// WebhookDeliveries returns the limit (at most 500) most recently updated
// deliveries, status "" for all, newest first.
func (d *DB) WebhookDeliveries(ctx context.Context, status string, limit int) ([]WebhookDelivery, error) {
	if limit <= 0 || limit > 500 {
		limit = 500
	}
	q, args := `SELECT `+webhookDeliveryColumns+` FROM unstuck_console_webhook_delivery`, []any{}
	if status != "" {
		q, args = q+` WHERE status = $1`, append(args, status)
	}
	q += fmt.Sprintf(` ORDER BY updated_at DESC, seq DESC LIMIT %d`, limit)
	var out []WebhookDelivery
	err := bulkConn{d}.each(ctx, q, args, func(scan func(...any) error) error {
		w, err := scanWebhookDelivery(scan)
		out = append(out, w)
		return err
	})
	return out, wrapBulk("read webhook deliveries", err)
}

// CountWebhookDeliveries counts the deliveries in status.
func (d *DB) CountWebhookDeliveries(ctx context.Context, status string) (n int64, err error) {
	err = bulkConn{d}.each(ctx, `SELECT count(*) FROM unstuck_console_webhook_delivery WHERE status = $1`, []any{status},
		func(scan func(...any) error) error { return scan(&n) })
	return n, wrapBulk("count webhook deliveries", err)
}

// webhookLockID is the first key of the PostgreSQL advisory lock of the
// webhook relay's leader ("unwh"); the second is the hash of the schema.
const webhookLockID int32 = 0x756e7768

// WebhookLeader runs fn if this console is the webhook relay's leader,
// and reports whether it was. On PostgreSQL fn runs while a transaction
// holds the relay's advisory lock of the schema
// (pg_try_advisory_xact_lock; another console holding it makes this one
// no leader); its own writes go through the pool. On SQLite, whose
// consoles share one file on one host, fn always runs. MySQL, which emits
// no decision events, has no relay.
func (d *DB) WebhookLeader(ctx context.Context, fn func(context.Context) error) (bool, error) {
	switch d.dialect {
	case DialectMySQL:
		return false, errors.New("store: no webhook relay on MySQL: it emits no decision events")
	case DialectSQLite:
		return true, fn(ctx)
	}
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("store: webhook lock: %w", pgMapError(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var got bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, hashtext(current_schema()))`, webhookLockID).Scan(&got); err != nil {
		return false, fmt.Errorf("store: webhook lock: %w", pgMapError(err))
	}
	if !got {
		return false, nil
	}
	return true, fn(ctx)
}

// WebhookRetention is how long the delivery log keeps a delivered or
// failed delivery after its last update.
const WebhookRetention = 30 * 24 * time.Hour

// DeleteOldWebhookDeliveries deletes the delivered and failed deliveries
// last updated before before, and returns how many. Pending ones stay:
// the relay still works on them.
func (d *DB) DeleteOldWebhookDeliveries(ctx context.Context, before time.Time) (int64, error) {
	c := bulkConn{d}
	n, err := c.exec(ctx, `DELETE FROM unstuck_console_webhook_delivery WHERE updated_at < $1 AND status <> $2`, c.ts(before), WebhookPending)
	return n, wrapBulk("delete old webhook deliveries", err)
}
