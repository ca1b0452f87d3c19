package consolecmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

func TestDemoShop(t *testing.T) {
	t.Parallel()
	for name, dbURL := range map[string]func(t *testing.T) string{
		"SQLite":     func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "demo.db") },
		"PostgreSQL": func(t *testing.T) string { return pgtest.Database(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			base := consoletest.StartDemo(t, run, dbURL(t))
			t.Run("Orders", func(t *testing.T) { testDemoOrders(t, base) })
			t.Run("Payments", func(t *testing.T) { testDemoPayments(t, base) })
			t.Run("Exports", func(t *testing.T) { testDemoExports(t, base) })
			t.Run("Metrics", func(t *testing.T) {
				m := consoletest.Call(t, "GET", base+"/metrics", "", "")
				require.Equal(t, http.StatusOK, m.Status)
				require.Contains(t, m.Body, "unstuck_idempotency_records{", "SPEC K10")
				require.Contains(t, m.Body, "unstuck_saga_operations{", "SPEC G10")
				require.Contains(t, m.Body, "unstuck_idempotency_outcomes_unrecorded_total", "the shop engine's late-recording counters")
				require.Contains(t, m.Body, "\nunstuck_clock_skew_seconds ", "the clock skew")
			})
		})
	}
}

func testDemoOrders(t *testing.T, base string) {
	key := `"order-key-0000000001"`
	first := consoletest.Call(t, "POST", base+"/shop/orders", key, `{"sku":"book","qty":2}`)
	require.Equal(t, http.StatusCreated, first.Status, first.Body)
	require.Equal(t, "book", first.JSON["sku"])
	require.EqualValues(t, 2, first.JSON["qty"])
	require.Empty(t, first.Header.Get("Idempotent-Replayed"))

	again := consoletest.Call(t, "POST", base+"/shop/orders", key, `{"sku":"book","qty":2}`)
	require.Equal(t, http.StatusCreated, again.Status)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"), "H7")
	require.Equal(t, first.Body, again.Body, "byte-identical replay")
	require.Equal(t, first.Header.Get("Location"), again.Header.Get("Location"))

	consoletest.RequireProblem(t, consoletest.Call(t, "POST", base+"/shop/orders", key, `{"sku":"book","qty":3}`), http.StatusUnprocessableEntity, "idempotency_key_reused")
	consoletest.RequireProblem(t, consoletest.Call(t, "POST", base+"/shop/orders", "", `{"sku":"book","qty":1}`), http.StatusBadRequest, "idempotency_key_missing")
	consoletest.RequireProblem(t, consoletest.Call(t, "POST", base+"/shop/orders", `"short"`, `{"sku":"book","qty":1}`), http.StatusBadRequest, "invalid_idempotency_key")
	consoletest.RequireProblem(t, consoletest.Call(t, "POST", base+"/shop/orders", "unquoted-key-0000001", `{"sku":"book","qty":1}`), http.StatusBadRequest, "invalid_idempotency_key")
	// README quick start #5: the key is checked before the body (SPEC H4),
	// so a bad key with a bad body is told about the key.
	consoletest.RequireProblem(t, consoletest.Call(t, "POST", base+"/shop/orders", `"short"`, `{}`), http.StatusBadRequest, "invalid_idempotency_key")
	consoletest.RequireProblem(t, consoletest.Call(t, "POST", base+"/shop/orders", "", `{}`), http.StatusBadRequest, "idempotency_key_missing")
	consoletest.RequireProblem(t, consoletest.Call(t, "POST", base+"/shop/exports", `"short"`, `{"format":"xml"}`), http.StatusBadRequest, "invalid_idempotency_key")

	bad := consoletest.Call(t, "POST", base+"/shop/orders", `"order-key-0000000002"`, `{"sku":"book"}`)
	consoletest.RequireProblem(t, bad, http.StatusBadRequest, "invalid_request")
	require.Equal(t, "qty", bad.JSON["field"])
	bad = consoletest.Call(t, "POST", base+"/shop/orders", `"order-key-0000000002"`, `{"sku":"book","qty":"two"}`)
	consoletest.RequireProblem(t, bad, http.StatusBadRequest, "invalid_request")
	require.Equal(t, "qty", bad.JSON["field"])
	consoletest.RequireProblem(t, consoletest.Call(t, "POST", base+"/shop/orders", `"order-key-0000000002"`, `{not json`), http.StatusBadRequest, "invalid_json")
	// Validation stored nothing: the same key works once the body is fixed.
	fixed := consoletest.Call(t, "POST", base+"/shop/orders", `"order-key-0000000002"`, `{"sku":"pen","qty":1}`)
	require.Equal(t, http.StatusCreated, fixed.Status, fixed.Body)

	// Scopes: another user with the same key gets an order of their own.
	other := consoletest.Call(t, "POST", base+"/shop/orders", key, `{"sku":"book","qty":2}`, "Authorization", "Bearer demo-alice")
	require.Equal(t, http.StatusCreated, other.Status)
	require.Empty(t, other.Header.Get("Idempotent-Replayed"))
	require.NotEqual(t, first.JSON["id"], other.JSON["id"])
	consoletest.RequireProblem(t, consoletest.Call(t, "POST", base+"/shop/orders", key, `{}`, "Authorization", "Basic x"), http.StatusUnauthorized, "unauthorized")
	// A bearer name that is not UTF-8 cannot scope a key: 400, not 503 from
	// PostgreSQL's refusal (SPEC H5).
	consoletest.RequireProblem(t, consoletest.Call(t, "POST", base+"/shop/orders", `"order-key-0000000003"`, `{"sku":"book","qty":1}`, "Authorization", "Bearer demo-caf\xe9"),
		http.StatusBadRequest, "invalid_idempotency_scope")

	list := consoletest.Call(t, "GET", base+"/shop/orders", "", "")
	require.Equal(t, http.StatusOK, list.Status)
	var orders []map[string]any
	require.NoError(t, json.Unmarshal([]byte(list.Body), &orders))
	require.Len(t, orders, 3, "one order per intent: %s", list.Body)
}

func testDemoPayments(t *testing.T, base string) {
	order := consoletest.Call(t, "POST", base+"/shop/orders", `"pay-order-000000001"`, `{"sku":"lamp","qty":1}`)
	require.Equal(t, http.StatusCreated, order.Status)
	body := fmt.Sprintf(`{"order_id":%q,"amount_cents":1999}`, order.JSON["id"])
	before := len(consoletest.ProviderCharges(t, base))

	ok := consoletest.Call(t, "POST", base+"/shop/payments", `"payment-key-00000001"`, body)
	require.Equal(t, http.StatusCreated, ok.Status, ok.Body)
	require.Equal(t, "succeeded", ok.JSON["status"])
	replay := consoletest.Call(t, "POST", base+"/shop/payments", `"payment-key-00000001"`, body)
	require.Equal(t, ok.Body, replay.Body)
	require.Len(t, consoletest.ProviderCharges(t, base), before+1, "charged once")

	// The answer is lost after the charge: the record is pending, repeats wait.
	lost := consoletest.Call(t, "POST", base+"/shop/payments?fail=timeout_after_effect", `"payment-key-00000002"`, body)
	require.Equal(t, http.StatusAccepted, lost.Status, lost.Body)
	require.Equal(t, "pending", lost.JSON["status"])
	require.Len(t, consoletest.ProviderCharges(t, base), before+2)
	wait := consoletest.Call(t, "POST", base+"/shop/payments?fail=timeout_after_effect", `"payment-key-00000002"`, body)
	// Waiting for an operator, not in progress: no Retry-After to loop on
	// (SPEC K21).
	consoletest.RequireProblem(t, wait, http.StatusConflict, "idempotency_outcome_pending_review")
	require.Empty(t, wait.Header.Get("Retry-After"))
	require.Len(t, consoletest.ProviderCharges(t, base), before+2, "a pending payment is never charged again")

	// A provider 500 releases the key: the retry charges once.
	failed := consoletest.Call(t, "POST", base+"/shop/payments?fail=error_500", `"payment-key-00000003"`, body)
	consoletest.RequireProblem(t, failed, http.StatusBadGateway, "provider_error")
	retried := consoletest.Call(t, "POST", base+"/shop/payments", `"payment-key-00000003"`, body)
	require.NotEqual(t, http.StatusUnprocessableEntity, retried.Status, "the query string is part of the request: %s", retried.Body)

	// A decline is a stored 4xx: replayed, never charged.
	declined := consoletest.Call(t, "POST", base+"/shop/payments?fail=permanent", `"payment-key-00000004"`, body)
	consoletest.RequireProblem(t, declined, http.StatusPaymentRequired, "payment_declined")
	again := consoletest.Call(t, "POST", base+"/shop/payments?fail=permanent", `"payment-key-00000004"`, body)
	require.Equal(t, http.StatusPaymentRequired, again.Status)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))

	consoletest.RequireProblem(t, consoletest.Call(t, "POST", base+"/shop/payments?fail=bogus", `"payment-key-00000005"`, body), http.StatusBadRequest, "invalid_request")
	missing := consoletest.Call(t, "POST", base+"/shop/payments", `"payment-key-00000006"`, `{"order_id":"ord_x"}`)
	consoletest.RequireProblem(t, missing, http.StatusBadRequest, "invalid_request")
	require.Equal(t, "amount_cents", missing.JSON["field"])
}

func testDemoExports(t *testing.T, base string) {
	a := consoletest.Call(t, "POST", base+"/shop/exports", "", `{"format":"json"}`)
	b := consoletest.Call(t, "POST", base+"/shop/exports", "", `{"format":"json"}`)
	require.Equal(t, http.StatusCreated, a.Status)
	require.NotEqual(t, a.JSON["id"], b.JSON["id"], "without a key every request runs (optional route)")
	k1 := consoletest.Call(t, "POST", base+"/shop/exports", `"export-key-00000001"`, ``)
	k2 := consoletest.Call(t, "POST", base+"/shop/exports", `"export-key-00000001"`, ``)
	require.Equal(t, http.StatusCreated, k1.Status, k1.Body)
	require.Equal(t, "csv", k1.JSON["format"])
	require.Equal(t, k1.Body, k2.Body)
	require.Equal(t, "true", k2.Header.Get("Idempotent-Replayed"))
}

func TestDemoStopsOnCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := run(ctx, []string{"demo", "--addr", "127.0.0.1:0", "--db", "sqlite:" + filepath.Join(t.TempDir(), "d.db")}, func(string) string { return "" }, io.Discard, io.Discard)
	require.NoError(t, err)
}
