package idem_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
)

// The HTTP middleware runs a POST once per Idempotency-Key and replays its
// stored response, with Idempotent-Replayed: true, to every repeat.
func ExampleNewMiddleware() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "idem-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := idemsqlite.Open(filepath.Join(dir, "idem.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	store := idemsqlite.New(db)
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	engine, err := idem.New(store, idem.Config{Secret: []byte("example-secret-of-at-least-32-bytes!")})
	if err != nil {
		log.Fatal(err)
	}
	mw, err := idem.NewMiddleware(engine, idem.MiddlewareConfig{})
	if err != nil {
		log.Fatal(err)
	}

	orders := 0
	createOrder := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		orders++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":%d}`, orders)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /orders", mw.Required(nil)(createOrder))

	for range 2 {
		req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{"sku":"book"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", `"order-0000000000001"`)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		fmt.Printf("%d %s Idempotent-Replayed=%q\n", rec.Code, rec.Body, rec.Header().Get("Idempotent-Replayed"))
	}
	fmt.Println("orders created:", orders)
	// Shutdown waits for outcomes still being recorded; call it before exit.
	if err := engine.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 201 {"order":1} Idempotent-Replayed=""
	// 201 {"order":1} Idempotent-Replayed="true"
	// orders created: 1
}

// A Transport does not resend a request whose outcome the server is
// checking (a key waiting for an operator): it returns a
// *PendingReviewResponseError, whose Detail can be shown to the user.
func ExamplePendingReviewResponseError() {
	var sent atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1) // what the middleware answers for a payment pending review:
		idem.WriteProblem(w, idem.Problem{Status: http.StatusConflict, Code: idem.CodePendingReview,
			Detail: "The outcome of your request is being checked."})
	}))
	defer server.Close()
	transport, err := idem.NewTransport(nil, idem.TransportConfig{})
	if err != nil {
		log.Fatal(err)
	}
	client := &http.Client{Transport: transport}

	ctx := idem.ContextWithKey(context.Background(), "payment-for-order-42")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, server.URL+"/payments", strings.NewReader(`{"amount_cents":1999}`))
	if err != nil {
		log.Fatal(err)
	}
	resp, err := client.Do(req)
	var pending *idem.PendingReviewResponseError
	switch {
	case errors.As(err, &pending):
		fmt.Printf("%s (payment %s)\n", pending.Detail, pending.Key)
	case err != nil:
		log.Fatal(err)
	default:
		resp.Body.Close()
	}
	fmt.Println("requests sent:", sent.Load())
	// Output:
	// The outcome of your request is being checked. (payment "payment-for-order-42")
	// requests sent: 1
}
