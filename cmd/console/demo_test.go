package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

// startDemo runs "console demo" on a free port over dbURL and returns its
// base URL. The demo stops when the test ends.
func startDemo(t *testing.T, dbURL string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"demo", "--addr", "127.0.0.1:0", "--db", dbURL, "--traffic=false"}, func(string) string { return "" }, pw, io.Discard)
		_ = pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	lines := bufio.NewScanner(pr)
	for lines.Scan() {
		if base, ok := strings.CutPrefix(lines.Text(), "listening on "); ok {
			go func() { _, _ = io.Copy(io.Discard, pr) }()
			return base
		}
	}
	t.Fatalf("demo stopped before listening: %v", <-done)
	return ""
}

type reply struct {
	status int
	header http.Header
	body   string
	json   map[string]any
}

func call(t *testing.T, method, url, key, body string, hdr ...string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	r := reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
	_ = json.Unmarshal(b, &r.json)
	return r
}

func requireProblem(t *testing.T, r reply, status int, code string) {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.body)
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
	require.Equal(t, code, r.json["code"], "body: %s", r.body)
	for _, member := range []string{"type", "title", "status", "detail"} {
		require.Contains(t, r.json, member)
	}
}

func TestDemoShop(t *testing.T) {
	t.Parallel()
	for name, dbURL := range map[string]func(t *testing.T) string{
		"SQLite":     func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "demo.db") },
		"PostgreSQL": func(t *testing.T) string { return pgtest.Database(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			base := startDemo(t, dbURL(t))
			t.Run("Orders", func(t *testing.T) { testDemoOrders(t, base) })
			t.Run("Payments", func(t *testing.T) { testDemoPayments(t, base) })
			t.Run("Exports", func(t *testing.T) { testDemoExports(t, base) })
			t.Run("Metrics", func(t *testing.T) {
				m := call(t, "GET", base+"/metrics", "", "")
				require.Equal(t, http.StatusOK, m.status)
				require.Contains(t, m.body, "unstuck_idempotency_records{", "SPEC K10")
				require.Contains(t, m.body, "unstuck_saga_operations{", "SPEC G10")
				require.Contains(t, m.body, "unstuck_idempotency_outcomes_unrecorded_total", "the shop engine's late-recording counters")
				require.Contains(t, m.body, "\nunstuck_clock_skew_seconds ", "the clock skew")
			})
		})
	}
}

func testDemoOrders(t *testing.T, base string) {
	key := `"order-key-0000000001"`
	first := call(t, "POST", base+"/shop/orders", key, `{"sku":"book","qty":2}`)
	require.Equal(t, http.StatusCreated, first.status, first.body)
	require.Equal(t, "book", first.json["sku"])
	require.EqualValues(t, 2, first.json["qty"])
	require.Empty(t, first.header.Get("Idempotent-Replayed"))

	again := call(t, "POST", base+"/shop/orders", key, `{"sku":"book","qty":2}`)
	require.Equal(t, http.StatusCreated, again.status)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"), "H7")
	require.Equal(t, first.body, again.body, "byte-identical replay")
	require.Equal(t, first.header.Get("Location"), again.header.Get("Location"))

	requireProblem(t, call(t, "POST", base+"/shop/orders", key, `{"sku":"book","qty":3}`), http.StatusUnprocessableEntity, "idempotency_key_reused")
	requireProblem(t, call(t, "POST", base+"/shop/orders", "", `{"sku":"book","qty":1}`), http.StatusBadRequest, "idempotency_key_missing")
	requireProblem(t, call(t, "POST", base+"/shop/orders", `"short"`, `{"sku":"book","qty":1}`), http.StatusBadRequest, "invalid_idempotency_key")
	requireProblem(t, call(t, "POST", base+"/shop/orders", "unquoted-key-0000001", `{"sku":"book","qty":1}`), http.StatusBadRequest, "invalid_idempotency_key")
	// README quick start #5: the key is checked before the body (SPEC H4),
	// so a bad key with a bad body is told about the key.
	requireProblem(t, call(t, "POST", base+"/shop/orders", `"short"`, `{}`), http.StatusBadRequest, "invalid_idempotency_key")
	requireProblem(t, call(t, "POST", base+"/shop/orders", "", `{}`), http.StatusBadRequest, "idempotency_key_missing")
	requireProblem(t, call(t, "POST", base+"/shop/exports", `"short"`, `{"format":"xml"}`), http.StatusBadRequest, "invalid_idempotency_key")

	bad := call(t, "POST", base+"/shop/orders", `"order-key-0000000002"`, `{"sku":"book"}`)
	requireProblem(t, bad, http.StatusBadRequest, "invalid_request")
	require.Equal(t, "qty", bad.json["field"])
	bad = call(t, "POST", base+"/shop/orders", `"order-key-0000000002"`, `{"sku":"book","qty":"two"}`)
	requireProblem(t, bad, http.StatusBadRequest, "invalid_request")
	require.Equal(t, "qty", bad.json["field"])
	requireProblem(t, call(t, "POST", base+"/shop/orders", `"order-key-0000000002"`, `{not json`), http.StatusBadRequest, "invalid_json")
	// Validation stored nothing: the same key works once the body is fixed.
	fixed := call(t, "POST", base+"/shop/orders", `"order-key-0000000002"`, `{"sku":"pen","qty":1}`)
	require.Equal(t, http.StatusCreated, fixed.status, fixed.body)

	// Scopes: another user with the same key gets an order of their own.
	other := call(t, "POST", base+"/shop/orders", key, `{"sku":"book","qty":2}`, "Authorization", "Bearer demo-alice")
	require.Equal(t, http.StatusCreated, other.status)
	require.Empty(t, other.header.Get("Idempotent-Replayed"))
	require.NotEqual(t, first.json["id"], other.json["id"])
	requireProblem(t, call(t, "POST", base+"/shop/orders", key, `{}`, "Authorization", "Basic x"), http.StatusUnauthorized, "unauthorized")
	// A bearer name that is not UTF-8 cannot scope a key: 400, not 503 from
	// PostgreSQL's refusal (SPEC H5).
	requireProblem(t, call(t, "POST", base+"/shop/orders", `"order-key-0000000003"`, `{"sku":"book","qty":1}`, "Authorization", "Bearer demo-caf\xe9"),
		http.StatusBadRequest, "invalid_idempotency_scope")

	list := call(t, "GET", base+"/shop/orders", "", "")
	require.Equal(t, http.StatusOK, list.status)
	var orders []map[string]any
	require.NoError(t, json.Unmarshal([]byte(list.body), &orders))
	require.Len(t, orders, 3, "one order per intent: %s", list.body)
}

func providerCharges(t *testing.T, base string) []map[string]any {
	t.Helper()
	st := call(t, "GET", base+"/shop/provider/state", "", "")
	require.Equal(t, http.StatusOK, st.status)
	var state struct {
		Charges []map[string]any `json:"charges"`
	}
	require.NoError(t, json.Unmarshal([]byte(st.body), &state))
	return state.Charges
}

func testDemoPayments(t *testing.T, base string) {
	order := call(t, "POST", base+"/shop/orders", `"pay-order-000000001"`, `{"sku":"lamp","qty":1}`)
	require.Equal(t, http.StatusCreated, order.status)
	body := fmt.Sprintf(`{"order_id":%q,"amount_cents":1999}`, order.json["id"])
	before := len(providerCharges(t, base))

	ok := call(t, "POST", base+"/shop/payments", `"payment-key-00000001"`, body)
	require.Equal(t, http.StatusCreated, ok.status, ok.body)
	require.Equal(t, "succeeded", ok.json["status"])
	replay := call(t, "POST", base+"/shop/payments", `"payment-key-00000001"`, body)
	require.Equal(t, ok.body, replay.body)
	require.Len(t, providerCharges(t, base), before+1, "charged once")

	// The answer is lost after the charge: the record is pending, repeats wait.
	lost := call(t, "POST", base+"/shop/payments?fail=timeout_after_effect", `"payment-key-00000002"`, body)
	require.Equal(t, http.StatusAccepted, lost.status, lost.body)
	require.Equal(t, "pending", lost.json["status"])
	require.Len(t, providerCharges(t, base), before+2)
	wait := call(t, "POST", base+"/shop/payments?fail=timeout_after_effect", `"payment-key-00000002"`, body)
	// Waiting for an operator, not in progress: no Retry-After to loop on
	// (SPEC K21).
	requireProblem(t, wait, http.StatusConflict, "idempotency_outcome_pending_review")
	require.Empty(t, wait.header.Get("Retry-After"))
	require.Len(t, providerCharges(t, base), before+2, "a pending payment is never charged again")

	// A provider 500 releases the key: the retry charges once.
	failed := call(t, "POST", base+"/shop/payments?fail=error_500", `"payment-key-00000003"`, body)
	requireProblem(t, failed, http.StatusBadGateway, "provider_error")
	retried := call(t, "POST", base+"/shop/payments", `"payment-key-00000003"`, body)
	require.NotEqual(t, http.StatusUnprocessableEntity, retried.status, "the query string is part of the request: %s", retried.body)

	// A decline is a stored 4xx: replayed, never charged.
	declined := call(t, "POST", base+"/shop/payments?fail=permanent", `"payment-key-00000004"`, body)
	requireProblem(t, declined, http.StatusPaymentRequired, "payment_declined")
	again := call(t, "POST", base+"/shop/payments?fail=permanent", `"payment-key-00000004"`, body)
	require.Equal(t, http.StatusPaymentRequired, again.status)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))

	requireProblem(t, call(t, "POST", base+"/shop/payments?fail=bogus", `"payment-key-00000005"`, body), http.StatusBadRequest, "invalid_request")
	missing := call(t, "POST", base+"/shop/payments", `"payment-key-00000006"`, `{"order_id":"ord_x"}`)
	requireProblem(t, missing, http.StatusBadRequest, "invalid_request")
	require.Equal(t, "amount_cents", missing.json["field"])
}

func testDemoExports(t *testing.T, base string) {
	a := call(t, "POST", base+"/shop/exports", "", `{"format":"json"}`)
	b := call(t, "POST", base+"/shop/exports", "", `{"format":"json"}`)
	require.Equal(t, http.StatusCreated, a.status)
	require.NotEqual(t, a.json["id"], b.json["id"], "without a key every request runs (optional route)")
	k1 := call(t, "POST", base+"/shop/exports", `"export-key-00000001"`, ``)
	k2 := call(t, "POST", base+"/shop/exports", `"export-key-00000001"`, ``)
	require.Equal(t, http.StatusCreated, k1.status, k1.body)
	require.Equal(t, "csv", k1.json["format"])
	require.Equal(t, k1.body, k2.body)
	require.Equal(t, "true", k2.header.Get("Idempotent-Replayed"))
}

func TestDemoStopsOnCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := run(ctx, []string{"demo", "--addr", "127.0.0.1:0", "--db", "sqlite:" + filepath.Join(t.TempDir(), "d.db")}, func(string) string { return "" }, io.Discard, io.Discard)
	require.NoError(t, err)
}
