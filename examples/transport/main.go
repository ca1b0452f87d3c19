// Command transport is an HTTP client whose Transport sets Idempotency-Key
// on POST and PATCH and retries with the same key. The server it talks to
// (started in the same process) runs the idem middleware on SQLite and
// fails its first attempt with 503, as an overloaded server would: the
// transport retries with the same key, and a later call with the same key
// is answered from the stored response.
//
//	go run ./examples/transport
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
)

func main() {
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	server, keysSeen, closeServer, err := startServer(ctx)
	if err != nil {
		return err
	}
	defer closeServer()

	// The client side: this is what an application calling an idempotent
	// API needs. Retries are bounded, with exponential backoff and jitter,
	// honouring Retry-After; 400, 422 and 409 pending review are never retried.
	transport, err := idem.NewTransport(nil,
		idem.TransportConfig{MaxAttempts: 4, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		return err
	}
	client := &http.Client{Transport: transport, Timeout: 10 * time.Second}

	// A key of your own (here the order's ID), so that a repeat after a
	// crash of this process carries the same key; without it the transport
	// makes a UUIDv7 per request, reused by its retries.
	orderCtx := idem.ContextWithKey(ctx, "order-7f3c9a12-0001")
	for i := 1; i <= 2; i++ {
		req, err := http.NewRequestWithContext(orderCtx, http.MethodPost, server+"/orders", strings.NewReader(`{"sku":"book"}`))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		// resp.Request is the attempt sent last: its header is the key as sent.
		fmt.Printf("call %d: %d %s key=%s Idempotent-Replayed=%q\n", i, resp.StatusCode, body,
			resp.Request.Header.Get("Idempotency-Key"), resp.Header.Get("Idempotent-Replayed"))
	}
	seen := keysSeen()
	fmt.Printf("server received %d attempts: %s\n", len(seen), strings.Join(seen, ", "))
	return nil
}

// startServer serves POST /orders behind the idem middleware on a
// temporary SQLite file. The handler answers 503 the first time (5xx
// releases the key, so the retry runs it again), then creates the order.
func startServer(ctx context.Context) (url string, keysSeen func() []string, closeFn func(), err error) {
	dir, err := os.MkdirTemp("", "unstuck-example-")
	if err != nil {
		return "", nil, nil, err
	}
	db, err := idemsqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, nil, err
	}
	cleanup := func() { db.Close(); os.RemoveAll(dir) }
	store := idemsqlite.New(db)
	if err := store.Migrate(ctx); err != nil {
		cleanup()
		return "", nil, nil, err
	}
	engine, err := idem.New(store, idem.Config{Secret: []byte("example-secret-not-for-production!!")})
	if err != nil {
		cleanup()
		return "", nil, nil, err
	}
	mw, err := idem.NewMiddleware(engine, idem.MiddlewareConfig{})
	if err != nil {
		cleanup()
		return "", nil, nil, err
	}

	var (
		mu    sync.Mutex
		seen  []string
		calls int
	)
	createOrder := mw.Required(nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			http.Error(w, "busy, try again", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"order":"ord_000001"}`)
	}))
	// record notes the key of every attempt that reaches the server.
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		createOrder.ServeHTTP(w, r)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /orders", record)
	srv := httptest.NewServer(mux)
	return srv.URL, func() []string {
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), seen...)
		}, func() {
			srv.Close()
			if err := engine.Shutdown(context.Background()); err != nil {
				log.Print(err)
			}
			cleanup()
		}, nil
}
