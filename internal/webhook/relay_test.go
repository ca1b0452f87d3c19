package webhook_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/decision"
	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idempgx"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/webhook"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

var testSecret = []byte("webhook-test-secret-0123456789abcdef")

// keyDecider decides on keys as the console does, with decision events on.
type keyDecider interface {
	Decide(ctx context.Context, a ops.Actor, d ops.KeyDecision) (ops.KeyResult, error)
}

// env is a console database with key decisions that emit events.
type env struct {
	trail   *audit.Trail
	console *store.DB
	engine  *idem.Engine
	records idemdriver.Admin
	keys    keyDecider
}

type migrator interface{ Migrate(context.Context) error }

func setupEnv[TTx any](t *testing.T, s idemdriver.Store, cdb *store.DB, trail *audit.Trail, rd riverdriver.Driver[TTx], d *ops.DB[TTx],
	keysOn func(*ops.DB[TTx], *idem.Engine) (*ops.Keys[TTx], error)) *env {
	t.Helper()
	ctx := t.Context()
	require.NoError(t, s.(migrator).Migrate(ctx))
	require.NoError(t, cdb.Migrate(ctx))
	require.NoError(t, trail.Migrate(ctx))
	m, err := rivermigrate.New(rd, nil)
	require.NoError(t, err)
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	require.NoError(t, err)
	client, err := river.NewClient(rd, &river.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, d.EmitEvents(client, ""))
	e, err := idem.New(s, idem.Config{Secret: []byte("webhook-test-engine-0123456789abcdef")})
	require.NoError(t, err)
	keys, err := keysOn(d, e)
	require.NoError(t, err)
	return &env{trail: trail, console: cdb, engine: e, records: s.(idemdriver.Admin), keys: keys}
}

func auditKeys(t *testing.T) *audit.Keyring {
	k, err := audit.NewKeyring([]byte("webhook-test-audit-key-0123456789ab"))
	require.NoError(t, err)
	return k
}

var envs = map[string]func(t *testing.T) *env{
	"SQLite": func(t *testing.T) *env {
		db, err := idemsqlite.Open(filepath.Join(t.TempDir(), "console.db"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		imm, err := ops.OpenImmediate(t.Context(), db)
		require.NoError(t, err)
		t.Cleanup(func() { _ = imm.Close() })
		cdb, trail := store.NewSQLite(db), audit.NewSQLite(db, audit.WithKeys(auditKeys(t)))
		d, err := ops.SQLite(imm, trail, cdb, nil)
		require.NoError(t, err)
		s := idemsqlite.New(db)
		return setupEnv(t, s, cdb, trail, riversqlite.New(imm), d,
			func(d *ops.DB[*sql.Tx], e *idem.Engine) (*ops.Keys[*sql.Tx], error) { return ops.NewKeys(d, e, s, s) })
	},
	"PostgreSQL": func(t *testing.T) *env {
		pool := pgtest.Schema(t)
		cdb, trail := store.NewPostgres(pool), audit.NewPostgres(pool, audit.WithKeys(auditKeys(t)))
		d, err := ops.Postgres(pool, trail, cdb, nil)
		require.NoError(t, err)
		s := idempgx.New(pool)
		return setupEnv(t, s, cdb, trail, riverpgxv5.New(pool), d,
			func(d *ops.DB[pgx.Tx], e *idem.Engine) (*ops.Keys[pgx.Tx], error) { return ops.NewKeys(d, e, s, s) })
	},
}

// decide makes a pending key and confirms it happened: one event.
func (e *env) decide(t *testing.T, key string) {
	t.Helper()
	ctx := t.Context()
	_, err := idem.Run(ctx, e.engine, key, "tenant:hooks", func(ctx context.Context) (int, error) {
		return 0, idem.Uncertain(errors.New("timeout"))
	}, nil)
	require.ErrorIs(t, err, idem.ErrUncertain)
	page, err := e.records.ListKeys(ctx, idemdriver.KeyFilter{Scope: "tenant:hooks", Operation: idem.DefaultOperation,
		KeyDigest: idem.Digest("tenant:hooks", idem.DefaultOperation, key)})
	require.NoError(t, err)
	require.Len(t, page.Records, 1)
	rec := page.Records[0]
	_, err = e.keys.Decide(ctx, ops.Actor{Username: "ada", Role: "oncall", RequestID: "req-" + key},
		ops.KeyDecision{RecordID: rec.ID, Version: rec.Version, Action: idem.OperatorConfirmHappened, ExternalRef: "ch_" + key,
			Reason: "the provider shows the charge"})
	require.NoError(t, err)
}

// receiver is a webhook endpoint that verifies every request and answers
// with the next of its statuses (200 once they run out).
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int
	got      []decision.CloudEvent
	tries    int
	bad      int
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	r := &receiver{statuses: statuses}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		require.NoError(t, err)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.tries++
		if decision.VerifySignature(testSecret, req.Header.Get(decision.SignatureHeader), body, time.Minute) != nil {
			r.bad++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		status := http.StatusOK
		if len(r.statuses) > 0 {
			status, r.statuses = r.statuses[0], r.statuses[1:]
		}
		if status == http.StatusOK {
			var ce decision.CloudEvent
			require.NoError(t, json.Unmarshal(body, &ce))
			r.got = append(r.got, ce)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

// attempts counts the requests, and unverified the ones whose signature
// did not verify.
func (r *receiver) attempts() (n, unverified int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tries, r.bad
}

func (r *receiver) events() []decision.CloudEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]decision.CloudEvent(nil), r.got...)
}

func newRelay(t *testing.T, e *env, reg prometheus.Registerer, urls ...string) *webhook.Relay {
	t.Helper()
	r, err := webhook.New(e.trail, e.console, webhook.Config{Endpoints: urls, Secret: testSecret, Source: "https://console.example",
		MaxAttempts: 3, BackoffBase: time.Millisecond, BackoffMax: 4 * time.Millisecond, Registerer: reg})
	require.NoError(t, err)
	return r
}

// until runs passes of r until cond holds, for at most 5 s.
func until(t *testing.T, r *webhook.Relay, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "condition not met in time")
		leader, err := r.Once(t.Context())
		require.NoError(t, err)
		require.True(t, leader)
		time.Sleep(2 * time.Millisecond)
	}
}

// TestWebhookRelay: decisions reach each endpoint once, signed, in
// CloudEvents form; a failing endpoint is retried with backoff, then
// given up visibly without holding back the next event; a restarted
// relay goes on from its cursor.
func TestWebhookRelay(t *testing.T) {
	t.Parallel()
	for name, setup := range envs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			e := setup(t)
			ok := newReceiver(t)
			flaky := newReceiver(t, 500, 500) // the third attempt succeeds
			down := newReceiver(t, 500, 502, 503)
			reg := prometheus.NewRegistry()
			r := newRelay(t, e, reg, ok.URL, flaky.URL+"?token=s3cret", down.URL)
			leader, err := r.Once(ctx) // the endpoints' cursors start here
			require.NoError(t, err)
			require.True(t, leader)

			e.decide(t, "w1")
			until(t, r, func() bool {
				return len(ok.events()) == 1 && len(flaky.events()) == 1 && func() bool { n, _ := down.attempts(); return n >= 3 }()
			})
			ce := ok.events()[0]
			hist, err := e.trail.History(ctx, "key", ce.Data.Subject.ID, 1)
			require.NoError(t, err)
			require.Equal(t, "1.0", ce.SpecVersion)
			require.Equal(t, ops.EventID(hist[0].Seq), ce.ID)
			require.Equal(t, "https://console.example", ce.Source)
			require.Equal(t, "dev.unstuck.decision.key.confirmed", ce.Type)
			require.Equal(t, "application/json", ce.DataContentType)
			require.True(t, ce.Time.Equal(hist[0].At))
			require.Equal(t, decision.Event{ID: ce.ID, Type: decision.KeyConfirmed, Outcome: decision.Happened, Actor: "ada",
				Reason: "the provider shows the charge", RequestID: "req-w1", Time: ce.Time,
				Subject: decision.Subject{Kind: "key", ID: ce.Data.Subject.ID, Scope: "tenant:hooks", Operation: idem.DefaultOperation, ExternalRef: "ch_w1"}},
				ce.Data)
			require.Equal(t, ce, flaky.events()[0], "the flaky endpoint got the same event")
			n, _ := flaky.attempts()
			require.Equal(t, 3, n, "two 500s, then the delivery")
			for _, rc := range []*receiver{ok, flaky, down} {
				_, unverified := rc.attempts()
				require.Zero(t, unverified, "every signature verifies")
			}

			// The always failing endpoint gave up after 3 attempts.
			failed, err := e.console.WebhookDeliveries(ctx, store.WebhookFailed, 10)
			require.NoError(t, err)
			require.Len(t, failed, 1)
			require.Equal(t, ce.ID, failed[0].EventID)
			require.Equal(t, 3, failed[0].Attempts)
			require.Equal(t, 503, failed[0].LastStatus)
			require.Equal(t, "HTTP 503", failed[0].LastError)
			require.Equal(t, down.URL, failed[0].Endpoint)
			all, err := e.console.WebhookDeliveries(ctx, "", 10)
			require.NoError(t, err)
			for _, d := range all {
				require.NotContains(t, d.Endpoint, "s3cret", "no token in the log")
			}
			require.InDelta(t, 1, metric(t, reg, "unstuck_decision_webhook_deliveries_total", "failed"), 0)

			// The next event still reaches every endpoint, down's too.
			e.decide(t, "w2")
			until(t, r, func() bool { return len(ok.events()) == 2 && len(flaky.events()) == 2 && len(down.events()) == 1 })
			require.Equal(t, ok.events()[1].ID, down.events()[0].ID)
			require.Equal(t, "ch_w2", down.events()[0].Data.Subject.ExternalRef)
			require.InDelta(t, 0, metric(t, reg, "unstuck_decision_webhook_oldest_undelivered_seconds", ""), 0, "nothing waits")

			// A new relay (a restart) delivers nothing again, then the
			// next decision only.
			r2 := newRelay(t, e, nil, ok.URL, flaky.URL+"?token=s3cret", down.URL)
			_, err = r2.Once(ctx)
			require.NoError(t, err)
			require.Len(t, ok.events(), 2, "no re-delivery after a restart")
			e.decide(t, "w3")
			until(t, r2, func() bool { return len(ok.events()) == 3 && len(flaky.events()) == 3 && len(down.events()) == 2 })
			require.Equal(t, "ch_w3", ok.events()[2].Data.Subject.ExternalRef)
		})
	}
}

// TestWebhookTamperedBody: a body changed after signing fails
// verification.
func TestWebhookTamperedBody(t *testing.T) {
	t.Parallel()
	e := envs["SQLite"](t)
	var mu sync.Mutex
	var verr error
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		tampered := []byte(string(body[:len(body)-1]) + ` ,"x":1}`)
		mu.Lock()
		verr = decision.VerifySignature(testSecret, req.Header.Get(decision.SignatureHeader), tampered, time.Minute)
		mu.Unlock()
		require.NoError(t, decision.VerifySignature(testSecret, req.Header.Get(decision.SignatureHeader), body, time.Minute))
	}))
	defer srv.Close()
	r := newRelay(t, e, nil, srv.URL)
	_, err := r.Once(t.Context())
	require.NoError(t, err)
	e.decide(t, "t1")
	_, err = r.Once(t.Context())
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.ErrorIs(t, verr, decision.ErrSignatureMismatch)
}

// TestWebhookConfig: a short secret or a bad URL is refused.
func TestWebhookConfig(t *testing.T) {
	t.Parallel()
	_, err := webhook.New(nil, nil, webhook.Config{Endpoints: []string{"https://x.example"}, Secret: []byte("short")})
	require.ErrorContains(t, err, "at least 32 bytes")
	_, err = webhook.New(nil, nil, webhook.Config{Endpoints: []string{"x.example/hook"}, Secret: testSecret})
	require.ErrorContains(t, err, "http(s)")
	_, err = webhook.New(nil, nil, webhook.Config{Secret: testSecret})
	require.Error(t, err)
}

// metric is the value of the sample of name gathered from reg, with the
// outcome label when outcome is set.
func metric(t *testing.T, reg *prometheus.Registry, name, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if outcome == "" || (len(m.GetLabel()) > 0 && m.GetLabel()[0].GetValue() == outcome) {
				return m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no metric %s %s", name, outcome)
	return 0
}
