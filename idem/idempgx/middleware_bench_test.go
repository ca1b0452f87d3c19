//go:build unix

package idempgx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/internal/benchfloor"
	"github.com/unstuckhq/unstuck/idem/internal/benchround"
)

// The benchmarks of this file drive the HTTP middleware end to end: a real
// http.Server on 127.0.0.1 with the middleware on a required route over
// this store (a fresh schema, the pool of newBenchEnv), and a keep-alive
// client in the same process. Each is measured side by side with the same
// handler without the middleware over the same loopback ("bare"). Run them
// in the same go test invocation as BenchmarkRunFirst and BenchmarkRunReplay
// (bench_test.go) to compare with the engine alone. cpu-ns/op covers the
// client and the server, both in this process; not PostgreSQL's. See
// BENCHMARKS.md for the commands and the figures.

const benchHTTPBody = `{"sku":"sku-123","qty":2}`

var benchHTTPResponse = []byte(`{"id":"ord_8c1f2a","sku":"sku-123","qty":2,"created_at":"2026-11-30T02:27:21Z"}` + "\n")

// benchHTTPHandler is the application handler: it reads and decodes the
// body, and answers 201 with JSON. It does not touch the database.
func benchHTTPHandler(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var order struct {
		SKU string `json:"sku"`
		Qty int    `json:"qty"`
	}
	if err == nil {
		err = json.Unmarshal(body, &order)
	}
	if err != nil || order.SKU == "" || order.Qty <= 0 {
		http.Error(w, "bad order", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(benchHTTPResponse)
}

// benchHTTP is one server and its client.
type benchHTTP struct {
	url    string
	client *http.Client
}

// newBenchHTTP serves h on "POST /orders" of a ServeMux on a free port of
// 127.0.0.1, and returns a client whose connections stay open: at most
// benchPoolConns idle connections to the server, opened before timing.
func newBenchHTTP(b *testing.B, h http.Handler) benchHTTP {
	b.Helper()
	mux := http.NewServeMux()
	mux.Handle("POST /orders", h)
	mux.HandleFunc("GET /ping", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	tr := &http.Transport{MaxIdleConns: benchPoolConns, MaxIdleConnsPerHost: benchPoolConns, IdleConnTimeout: time.Minute, DisableCompression: true}
	b.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = srv.Close()
	})
	bh := benchHTTP{url: "http://" + ln.Addr().String(), client: &http.Client{Transport: tr}}
	// Open benchPoolConns connections at once, so that the 8-goroutine
	// benchmarks find them open.
	var wg sync.WaitGroup
	errs := make([]error, benchPoolConns)
	start := make(chan struct{})
	for i := range benchPoolConns {
		wg.Go(func() {
			<-start
			resp, err := bh.client.Get(bh.url + "/ping")
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				err = resp.Body.Close()
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	return bh
}

// post sends the order with key (as a quoted sf-string) and returns the
// status and whether the response says it was replayed. The body is read to
// the end, so the connection is reused.
func (bh benchHTTP) post(ctx context.Context, key string) (status int, replayed bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, bh.url+"/orders", strings.NewReader(benchHTTPBody))
	if err != nil {
		return 0, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", `"`+key+`"`)
	resp, err := bh.client.Do(req)
	if err != nil {
		return 0, false, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	return resp.StatusCode, resp.Header.Get(idem.HeaderReplayed) == "true", err
}

// benchHTTPCheck returns an error unless the answer is 201 and replayed as
// wanted.
func benchHTTPCheck(status int, replayed bool, err error, wantReplayed bool) error {
	switch {
	case err != nil:
		return err
	case status != http.StatusCreated:
		return fmt.Errorf("status %d", status)
	case replayed != wantReplayed:
		return fmt.Errorf("replayed %v, want %v", replayed, wantReplayed)
	}
	return nil
}

// newBenchHTTPMiddleware builds a fresh schema (newBenchEnv) and serves the
// handler behind the middleware on it: default configuration, required
// key, scope ip:127.0.0.1 (AddressScope), route "POST /orders".
func newBenchHTTPMiddleware(b *testing.B) benchHTTP {
	b.Helper()
	env := newBenchEnv(b)
	m, err := idem.NewMiddleware(env.engine, idem.MiddlewareConfig{})
	if err != nil {
		b.Fatal(err)
	}
	return newBenchHTTP(b, m.Required(nil)(http.HandlerFunc(benchHTTPHandler)))
}

// benchHTTPKey returns a UUID-shaped key, 36 characters, unique to prefix
// (8 hex digits) and i.
func benchHTTPKey(prefix string, i int) string {
	s := strconv.FormatInt(int64(i), 16)
	return prefix + "-7b1a-7000-8000-" + strings.Repeat("0", 12-len(s)) + s
}

// BenchmarkMiddlewareHTTPFirst measures a first request over loopback: a
// new key each time, so the middleware reserves it (INSERT), runs the
// handler and completes the key with the sealed response (UPDATE). bare is
// the same request to the handler without the middleware.
func BenchmarkMiddlewareHTTPFirst(b *testing.B) {
	for _, g := range benchGoroutines {
		b.Run("middleware/goroutines="+strconv.Itoa(g), func(b *testing.B) {
			bh := newBenchHTTPMiddleware(b)
			prefix := benchfloor.RandomHex()[:8]
			benchround.Parallel(b, g, func(ctx context.Context, i int) error {
				status, replayed, err := bh.post(ctx, benchHTTPKey(prefix, i))
				return benchHTTPCheck(status, replayed, err, false)
			})
		})
		b.Run("bare/goroutines="+strconv.Itoa(g), func(b *testing.B) {
			bh := newBenchHTTP(b, http.HandlerFunc(benchHTTPHandler))
			prefix := benchfloor.RandomHex()[:8]
			benchround.Parallel(b, g, func(ctx context.Context, i int) error {
				status, replayed, err := bh.post(ctx, benchHTTPKey(prefix, i))
				return benchHTTPCheck(status, replayed, err, false)
			})
		})
	}
}

// BenchmarkMiddlewareHTTPReplay measures a replay over loopback:
// benchReplayKeys keys completed beforehand through the middleware, cycled.
// The middleware reserves (INSERT … ON CONFLICT finds the record), reads it
// (SELECT), opens the stored response and writes it. bare is the same
// request to the handler without the middleware.
func BenchmarkMiddlewareHTTPReplay(b *testing.B) {
	keys := func(b *testing.B) []string {
		prefix := benchfloor.RandomHex()[:8]
		out := make([]string, benchReplayKeys)
		for i := range out {
			out[i] = benchHTTPKey(prefix, i)
		}
		return out
	}
	for _, g := range benchGoroutines {
		b.Run("middleware/goroutines="+strconv.Itoa(g), func(b *testing.B) {
			bh := newBenchHTTPMiddleware(b)
			ks := keys(b)
			var wg sync.WaitGroup
			errs := make([]error, benchPoolConns)
			for w := range benchPoolConns {
				wg.Go(func() {
					for i := w; i < len(ks) && errs[w] == nil; i += benchPoolConns {
						status, replayed, err := bh.post(context.Background(), ks[i])
						errs[w] = benchHTTPCheck(status, replayed, err, false)
					}
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				b.Fatal(err)
			}
			benchround.Parallel(b, g, func(ctx context.Context, i int) error {
				status, replayed, err := bh.post(ctx, ks[i%len(ks)])
				return benchHTTPCheck(status, replayed, err, true)
			})
		})
		b.Run("bare/goroutines="+strconv.Itoa(g), func(b *testing.B) {
			bh := newBenchHTTP(b, http.HandlerFunc(benchHTTPHandler))
			ks := keys(b)
			benchround.Parallel(b, g, func(ctx context.Context, i int) error {
				status, replayed, err := bh.post(ctx, ks[i%len(ks)])
				return benchHTTPCheck(status, replayed, err, false)
			})
		})
	}
}
