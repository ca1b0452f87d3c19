package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/unstuckhq/unstuck/idem"
)

// Traffic keeps records in every state while the demo runs: completed and
// replayed orders, pending payments with a provider reference, declined
// (failed) payments, a job whose result could not be stored (unavailable),
// a long job under a live lease, a stalled one past its lease, and signup
// sagas that complete, compensate or need review. It returns when ctx ends.
func Traffic(ctx context.Context, base string, engine *idem.Engine, log *slog.Logger) {
	client := &http.Client{Timeout: 10 * time.Second}
	go longJob(ctx, engine, "demo:nightly-export", 24*time.Hour, log) // processing, live lease
	go longJob(ctx, engine, "demo:stalled-sync", time.Second, log)    // processing past its lease
	unavailableJob(ctx, engine, log)

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	users := []string{"alice", "bob", "carol"}
	for i := 0; ; i++ {
		user := users[i%len(users)]
		key := fmt.Sprintf(`"traffic-order-%d-%08d"`, time.Now().Unix(), i)
		body := fmt.Sprintf(`{"sku":"sku-%d","qty":%d}`, rng.IntN(50), 1+rng.IntN(3))
		order, err := post(ctx, client, base+"/shop/orders", key, user, body)
		if err == nil {
			_, _ = post(ctx, client, base+"/shop/orders", key, user, body) // the client retries: a replay
			fail := ""
			switch i % 6 {
			case 2:
				fail = "?fail=timeout_after_effect"
			case 4:
				fail = "?fail=permanent"
			case 5:
				fail = "?fail=error_500"
			}
			_, _ = post(ctx, client, base+"/shop/payments"+fail, fmt.Sprintf(`"traffic-pay-%d-%08d"`, time.Now().Unix(), i), user,
				fmt.Sprintf(`{"order_id":%q,"amount_cents":%d}`, order["id"], 100+rng.IntN(10000)))
		} else if ctx.Err() == nil {
			log.Warn("demo traffic: order failed", "error", err.Error())
		}
		if i%4 == 0 { // a signup saga, sometimes failing, so operations show every status
			modes := []string{"", "workspace_permanent", "workspace_timeout_after_effect", "workspace_compensation_fails", "welcome_permanent", ""}
			fail := ""
			if m := modes[(i/4)%len(modes)]; m != "" {
				fail = fmt.Sprintf(`,"fail":%q`, m)
			}
			_, _ = post(ctx, client, base+"/shop/signups", fmt.Sprintf(`"traffic-signup-%d-%08d"`, time.Now().Unix(), i), user,
				fmt.Sprintf(`{"email":"%s+%d-%d@example.com"%s}`, user, time.Now().Unix(), i, fail))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(2000+rng.IntN(3000)) * time.Millisecond):
		}
	}
}

// post sends body with an idempotency key as a demo user and decodes the
// JSON object answer.
func post(ctx context.Context, c *http.Client, url, key, user, body string) (map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Authorization", "Bearer demo-"+user)
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("status %d: %w", resp.StatusCode, err)
	}
	if resp.StatusCode >= 300 {
		return out, fmt.Errorf("status %d", resp.StatusCode)
	}
	return out, nil
}

// longJob holds a key until ctx ends, under the given lease.
func longJob(ctx context.Context, engine *idem.Engine, op string, lease time.Duration, log *slog.Logger) {
	key := fmt.Sprintf("%s-%d", op, time.Now().Unix())
	_, err := idem.Run(ctx, engine, key, "job:demo", func(ctx context.Context) (struct{}, error) {
		_ = idem.Annotate(ctx, idem.Annotation{CorrelationID: "batch-" + key[len(key)-4:]})
		<-ctx.Done()
		return struct{}{}, ctx.Err()
	}, &idem.RunOpts{Operation: op, Lease: lease})
	if err != nil && ctx.Err() == nil {
		log.Warn("demo traffic: long job", "operation", op, "error", err.Error())
	}
}

// unavailableJob runs a job whose result cannot be stored, leaving its key
// unavailable: the effect happened, the answer is lost.
func unavailableJob(ctx context.Context, engine *idem.Engine, log *slog.Logger) {
	key := fmt.Sprintf("receipt-%d", time.Now().Unix())
	_, err := idem.Run(ctx, engine, key, "job:demo", func(ctx context.Context) (float64, error) {
		_ = idem.Annotate(ctx, idem.Annotation{ExternalRef: "mail-" + key, ResourceIDs: []string{"receipt:" + key}})
		return math.NaN(), nil
	}, &idem.RunOpts{Operation: "demo:send-receipt"})
	if err != nil && ctx.Err() == nil {
		log.Info("demo traffic: a receipt job left its key unavailable", "error", err.Error())
	}
}
