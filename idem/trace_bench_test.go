package idem

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"strconv"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// BenchmarkTracing measures the cost of tracing: the
// middleware (first request, replay) and Run (first run, replay) on the
// in-memory fixture store, with tracing off (no TracerProvider: the
// default) and on (an SDK provider that samples every span and exports
// none: the span work without the exporter's). Off must cost what the
// engine cost before tracing existed (compare BenchmarkMiddleware at the
// commit before); on is what an adopter pays per request.
//
//	go test -run '^$' -bench 'BenchmarkTracing' -benchmem -benchtime 2s -count 6 ./idem/
func BenchmarkTracing(b *testing.B) {
	modes := []struct {
		name string
		cfg  func() Config
	}{
		{"off", func() Config { return Config{} }},
		{"on", func() Config {
			return Config{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))}
		}},
	}
	engine := func(b *testing.B, cfg Config) *Engine {
		secret := make([]byte, MinSecretBytes)
		if _, err := rand.Read(secret); err != nil {
			b.Fatal(err)
		}
		cfg.Secret = secret
		e, err := New(newBenchMemStore(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		return e
	}
	stack := func(b *testing.B, e *Engine) http.Handler {
		m, err := NewMiddleware(e, MiddlewareConfig{})
		if err != nil {
			b.Fatal(err)
		}
		return m.Required(nil)(http.HandlerFunc(benchMWHandler))
	}
	fn := func(context.Context) (string, error) { return "ch_0123456789", nil }
	for _, m := range modes {
		b.Run("middleware-first/"+m.name, func(b *testing.B) {
			h := stack(b, engine(b, m.cfg()))
			q := newBenchMWRequest()
			benchLoop(b, func(i int) error { return benchMWServe(h, q.next(i+1), false) })
		})
		b.Run("middleware-replay/"+m.name, func(b *testing.B) {
			h := stack(b, engine(b, m.cfg()))
			q := newBenchMWRequest()
			if err := benchMWServe(h, q.next(0), false); err != nil {
				b.Fatal(err)
			}
			benchLoop(b, func(int) error { return benchMWServe(h, q.next(0), true) })
		})
		b.Run("run-first/"+m.name, func(b *testing.B) {
			e := engine(b, m.cfg())
			ctx := context.Background()
			benchLoop(b, func(i int) error {
				_, err := Run(ctx, e, "order-"+strconv.Itoa(i), "tenant:42", fn, nil)
				return err
			})
		})
		b.Run("run-replay/"+m.name, func(b *testing.B) {
			e := engine(b, m.cfg())
			ctx := context.Background()
			if _, err := Run(ctx, e, "order-replayed", "tenant:42", fn, nil); err != nil {
				b.Fatal(err)
			}
			benchLoop(b, func(int) error {
				r, err := Run(ctx, e, "order-replayed", "tenant:42", fn, nil)
				if err == nil && !r.Replayed {
					err = errors.New("not replayed")
				}
				return err
			})
		})
	}
}
