// Package webhook is the console's relay of decision events to webhook
// endpoints (SPEC K26): it reads the audit entries that emitted a decision
// event, past a cursor per endpoint, and posts each event to each
// endpoint as a signed CloudEvent (package decision), in seq order, at
// least once, retrying with backoff and giving up visibly after the last
// attempt. Its state is the console store's cursor and delivery log
// (migration 011).
package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/unstuckhq/unstuck/decision"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/outbound"
	"github.com/unstuckhq/unstuck/internal/store"
)

// Defaults of [Config].
const (
	DefaultTimeout     = 5 * time.Second
	DefaultMaxAttempts = 10
	DefaultBackoffBase = time.Second
	DefaultBackoffMax  = 5 * time.Minute
	DefaultEvery       = time.Second
	// MinSecretBytes is the shortest signing secret accepted.
	MinSecretBytes = 32
)

// batch is how many events one read past a cursor takes.
const batch = 100

// Config configures a [Relay].
type Config struct {
	// Endpoints are the webhook URLs, each an absolute http(s) URL.
	Endpoints []string
	// Secret signs every body (decision.Sign); at least MinSecretBytes.
	Secret []byte
	// Source is the CloudEvents source: the console's URL, or "" for
	// decision.DefaultSource.
	Source string
	// Timeout bounds one attempt (DefaultTimeout when 0).
	Timeout time.Duration
	// MaxAttempts is how many attempts an event gets before it is given
	// up (DefaultMaxAttempts when 0).
	MaxAttempts int
	// BackoffBase and BackoffMax shape the wait after the n-th failed
	// attempt: BackoffBase·2^(n-1), at most BackoffMax, plus up to a
	// fifth more of jitter (DefaultBackoffBase, DefaultBackoffMax).
	BackoffBase, BackoffMax time.Duration
	// Every is how often Run looks for events (DefaultEvery when 0).
	Every time.Duration
	// Client posts (a client that follows no redirect when nil).
	Client *http.Client
	// Registerer, if set, gets the relay's metrics.
	Registerer prometheus.Registerer
	Log        *slog.Logger
}

// Store is the console store's part the relay uses (*store.DB).
type Store interface {
	WebhookCursor(ctx context.Context, key string) (int64, bool, error)
	SetWebhookCursor(ctx context.Context, key, endpoint string, seq int64) error
	WebhookDeliveryOf(ctx context.Context, key string, seq int64) (store.WebhookDelivery, bool, error)
	SaveWebhookDelivery(ctx context.Context, w store.WebhookDelivery) error
	WebhookLeader(ctx context.Context, fn func(context.Context) error) (bool, error)
	DeleteOldWebhookDeliveries(ctx context.Context, before time.Time) (int64, error)
}

// Relay delivers decision events to webhook endpoints.
type Relay struct {
	cfg       Config
	trail     *audit.Trail
	st        Store
	endpoints []endpoint
	log       *slog.Logger

	deliveries *prometheus.CounterVec
	oldest     prometheus.Gauge
}

// endpoint is a configured URL, its key (the hex SHA-256 of the URL) and
// its display form.
type endpoint struct{ url, key, display string }

// Outcomes of the deliveries metric.
const (
	outcomeDelivered = "delivered"
	outcomeRetried   = "retried"
	outcomeFailed    = "failed"
)

// New checks cfg and returns its relay over the trail and st.
func New(trail *audit.Trail, st Store, cfg Config) (*Relay, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("webhook: no endpoint")
	}
	if len(cfg.Secret) < MinSecretBytes {
		return nil, errors.New("webhook: the signing secret must be at least " + strconv.Itoa(MinSecretBytes) + " bytes")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = DefaultBackoffBase
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = DefaultBackoffMax
	}
	if cfg.Every <= 0 {
		cfg.Every = DefaultEvery
	}
	if cfg.Client == nil {
		// A redirect is a failure: the signed body goes nowhere else.
		cfg.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	r := &Relay{cfg: cfg, trail: trail, st: st, log: cfg.Log,
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "unstuck_decision_webhook_deliveries_total",
			Help: "Attempts to deliver a decision event to a webhook endpoint, by outcome: delivered (a 2xx), retried (a failed attempt to be tried again), failed (given up after the last attempt)."},
			[]string{"outcome"}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{Name: "unstuck_decision_webhook_oldest_undelivered_seconds",
			Help: "Age of the oldest decision event some webhook endpoint has not been delivered yet (0: none waits)."}),
	}
	for _, o := range []string{outcomeDelivered, outcomeRetried, outcomeFailed} {
		r.deliveries.WithLabelValues(o)
	}
	seen := map[string]bool{}
	for _, u := range cfg.Endpoints {
		if err := outbound.CheckURL(u); err != nil {
			return nil, errors.New("webhook: " + outbound.Display(u) + ": " + err.Error())
		}
		sum := sha256.Sum256([]byte(u))
		key := hex.EncodeToString(sum[:])
		if !seen[key] {
			seen[key] = true
			r.endpoints = append(r.endpoints, endpoint{url: u, key: key, display: outbound.Display(u)})
		}
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(r.deliveries); err != nil {
			return nil, err
		}
		if err := cfg.Registerer.Register(r.oldest); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// pruneEvery is how often Run deletes the delivery log's rows older than
// store.WebhookRetention.
const pruneEvery = time.Hour

// Run delivers every Every until ctx ends, while this console is the
// relay's leader (store.DB.WebhookLeader), and prunes the delivery log
// once an hour.
func (r *Relay) Run(ctx context.Context) {
	t := time.NewTicker(r.cfg.Every)
	defer t.Stop()
	var pruned time.Time
	for {
		if _, err := r.Once(ctx); err != nil && ctx.Err() == nil {
			r.log.Error("decision webhooks", "error", err.Error())
		}
		if time.Since(pruned) >= pruneEvery {
			pruned = time.Now()
			if n, err := r.st.DeleteOldWebhookDeliveries(ctx, pruned.Add(-store.WebhookRetention)); err != nil && ctx.Err() == nil {
				r.log.Error("decision webhooks: pruning the delivery log", "error", err.Error())
			} else if n > 0 {
				r.log.Info("decision webhooks: pruned the delivery log", "deleted", n)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Once makes one pass over every endpoint as the leader, and reports
// whether this console was: each endpoint gets its events past its cursor
// until it is caught up or waits for a retry.
func (r *Relay) Once(ctx context.Context) (leader bool, err error) {
	return r.st.WebhookLeader(ctx, func(ctx context.Context) error {
		var oldest time.Time
		var errs []error
		for _, ep := range r.endpoints {
			waiting, err := r.endpointPass(ctx, ep)
			if err != nil {
				errs = append(errs, errors.New(ep.display+": "+err.Error()))
			}
			if !waiting.IsZero() && (oldest.IsZero() || waiting.Before(oldest)) {
				oldest = waiting
			}
		}
		if oldest.IsZero() {
			r.oldest.Set(0)
		} else {
			r.oldest.Set(time.Since(oldest).Seconds())
		}
		return errors.Join(errs...)
	})
}

// endpointPass delivers ep's events past its cursor, in seq order, and
// returns the time of the event it stopped at (zero when caught up).
func (r *Relay) endpointPass(ctx context.Context, ep endpoint) (waiting time.Time, err error) {
	cursor, ok, err := r.st.WebhookCursor(ctx, ep.key)
	if err != nil {
		return time.Time{}, err
	}
	if !ok {
		// A new endpoint gets the events decided from now on, not the
		// whole history.
		if cursor, err = r.trail.Newest(ctx); err != nil {
			return time.Time{}, err
		}
		if err := r.st.SetWebhookCursor(ctx, ep.key, ep.display, cursor); err != nil {
			return time.Time{}, err
		}
	}
	for {
		entries, err := r.trail.MarkedAfter(ctx, ops.EventMarker, cursor, batch)
		if err != nil || len(entries) == 0 {
			return time.Time{}, err
		}
		for _, e := range entries {
			done, err := r.deliver(ctx, ep, e)
			if err != nil {
				return e.At, err
			}
			if !done {
				return e.At, nil
			}
			if err := r.st.SetWebhookCursor(ctx, ep.key, ep.display, e.Seq); err != nil {
				return e.At, err
			}
			cursor = e.Seq
		}
	}
}

// deliver tries e's event on ep unless its delivery is done or waits for
// its next attempt, and reports whether the relay is done with it
// (delivered or given up).
func (r *Relay) deliver(ctx context.Context, ep endpoint, e audit.Entry) (done bool, err error) {
	ev, ok := ops.EventOf(e)
	if !ok {
		return true, nil // not an event the relay can say: nothing to deliver
	}
	d, found, err := r.st.WebhookDeliveryOf(ctx, ep.key, e.Seq)
	switch {
	case err != nil:
		return false, err
	case found && d.Status != store.WebhookPending:
		return true, nil
	case found && time.Now().Before(d.NextAttemptAt):
		return false, nil
	case !found:
		d = store.WebhookDelivery{EndpointKey: ep.key, Endpoint: ep.display, Seq: e.Seq, EventID: ev.ID, EventTime: ev.Time}
	}
	prev, ok, err := r.trail.LastMarked(ctx, e.TargetKind, e.TargetID, ops.EventMarker, e.Seq)
	if err != nil {
		return false, err
	}
	if ok {
		ev.Previous, ev.PreviousTime = ops.EventID(prev.Seq), prev.At
	}
	body, err := json.Marshal(decision.NewCloudEvent(r.cfg.Source, ev))
	if err != nil {
		return false, err
	}
	header := http.Header{
		"Content-Type":           {decision.ContentType},
		"User-Agent":             {"unstuck-console"},
		decision.SignatureHeader: {decision.Sign(r.cfg.Secret, time.Now(), body)},
	}
	status, postErr := outbound.Post(ctx, r.cfg.Client, ep.url, header, body, r.cfg.Timeout)
	if ctx.Err() != nil {
		return false, ctx.Err() // stopping: the attempt does not count
	}
	d.Attempts++
	d.LastStatus, d.LastError = status, ""
	switch {
	case postErr == nil && status >= 200 && status < 300:
		d.Status, d.NextAttemptAt, d.DeliveredAt = store.WebhookDelivered, time.Time{}, time.Now()
	case postErr != nil:
		d.LastError = postErr.Error()
	default:
		d.LastError = "HTTP " + strconv.Itoa(status)
	}
	switch {
	case d.Status == store.WebhookDelivered:
		r.deliveries.WithLabelValues(outcomeDelivered).Inc()
	case d.Attempts >= r.cfg.MaxAttempts:
		d.Status, d.NextAttemptAt = store.WebhookFailed, time.Time{}
		r.deliveries.WithLabelValues(outcomeFailed).Inc()
		r.log.Error("decision webhook given up", "endpoint", ep.display, "event", ev.ID, "attempts", d.Attempts,
			"status", d.LastStatus, "error", d.LastError)
	default:
		d.Status, d.NextAttemptAt = store.WebhookPending, time.Now().Add(r.backoff(d.Attempts))
		r.deliveries.WithLabelValues(outcomeRetried).Inc()
	}
	if err := r.st.SaveWebhookDelivery(ctx, d); err != nil {
		return false, err
	}
	return d.Status != store.WebhookPending, nil
}

// backoff is the wait after the n-th failed attempt.
func (r *Relay) backoff(n int) time.Duration {
	d := r.cfg.BackoffBase
	for i := 1; i < n && d < r.cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, r.cfg.BackoffMax)
	return d + rand.N(d/5+1) //nolint:gosec // jitter, not a secret
}
