package idem_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemtest"
)

// Secrets of the tracing tests: none may appear in a span.
const (
	traceKey     = "raw-key-Zq81-never-exported"
	traceScope   = "tenant:bob+17@example.com"
	tracePayload = "card-4111111111111111-payload"
)

// spanAttrs returns the attributes of the span named name (the last one
// recorded), as a map.
func spanAttrs(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) (sdktrace.ReadOnlySpan, map[attribute.Key]attribute.Value) {
	t.Helper()
	for i := len(spans) - 1; i >= 0; i-- {
		if spans[i].Name() == name {
			m := map[attribute.Key]attribute.Value{}
			for _, kv := range spans[i].Attributes() {
				m[kv.Key] = kv.Value
			}
			return spans[i], m
		}
	}
	t.Fatalf("no span %s among %d", name, len(spans))
	return nil, nil
}

// requireNoSecrets fails if any span's name, attribute, event, link or
// status carries one of secrets.
func requireNoSecrets(t *testing.T, spans []sdktrace.ReadOnlySpan, secrets ...string) {
	t.Helper()
	require.NotEmpty(t, spans)
	for _, s := range spans {
		var texts []string
		texts = append(texts, s.Name(), s.Status().Description)
		for _, kv := range s.Attributes() {
			texts = append(texts, string(kv.Key), kv.Value.String())
		}
		for _, ev := range s.Events() {
			texts = append(texts, ev.Name)
			for _, kv := range ev.Attributes {
				texts = append(texts, string(kv.Key), kv.Value.String())
			}
		}
		for _, text := range texts {
			for _, secret := range secrets {
				require.NotContains(t, text, secret, "span %s", s.Name())
			}
		}
	}
}

// TestK18RunSpans: with a tracer provider, Run records
// idem.run and idem.decide with the decision, the record ID, the fence and
// the attempt; the record keeps the trace ID of the call that created it;
// no span carries the raw key, the scope or the payload.
func TestK18RunSpans(t *testing.T) {
	t.Parallel()
	store, _ := newSQLiteStore(t)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	e, err := idem.New(store, idem.Config{Secret: idemtest.Secret, TracerProvider: tp})
	require.NoError(t, err)
	type charge struct{ Card string }
	fn := func(context.Context) (charge, error) { return charge{Card: tracePayload}, nil }

	first, err := idem.Run(t.Context(), e, traceKey, traceScope, fn, &idem.RunOpts{Operation: "charge"})
	require.NoError(t, err)
	require.False(t, first.Replayed)
	run, attrs := spanAttrs(t, spans.Ended(), idem.SpanRun)
	require.Equal(t, "charge", attrs[idem.AttrOperation].AsString())
	require.False(t, attrs[idem.AttrReplayed].AsBool())
	decide, attrs := spanAttrs(t, spans.Ended(), idem.SpanDecide)
	require.Equal(t, run.SpanContext().SpanID(), decide.Parent().SpanID(), "the decision is a child of the run")
	require.Equal(t, "first", attrs[idem.AttrDecision].AsString())
	require.Equal(t, int64(1), attrs[idem.AttrAttempt].AsInt64())
	require.Positive(t, attrs[idem.AttrFence].AsInt64())
	recordID := attrs[idem.AttrRecordID].AsInt64()
	require.Positive(t, recordID)
	id := idemdriver.Ident{Scope: traceScope, Operation: "charge", KeyDigest: idem.Digest(traceScope, "charge", traceKey)}
	require.Equal(t, idem.SafeKeyID(id.KeyDigest), attrs[idem.AttrKeyID].AsString())
	rec, ok, err := store.Get(t.Context(), id)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, recordID, rec.ID)
	require.Equal(t, run.SpanContext().TraceID().String(), rec.TraceID, "the record keeps the trace that created it")

	again, err := idem.Run(t.Context(), e, traceKey, traceScope, fn, &idem.RunOpts{Operation: "charge"})
	require.NoError(t, err)
	require.True(t, again.Replayed)
	_, attrs = spanAttrs(t, spans.Ended(), idem.SpanRun)
	require.True(t, attrs[idem.AttrReplayed].AsBool())
	_, attrs = spanAttrs(t, spans.Ended(), idem.SpanDecide)
	require.Equal(t, "replay", attrs[idem.AttrDecision].AsString())
	require.Equal(t, recordID, attrs[idem.AttrRecordID].AsInt64())
	require.NotContains(t, attrs, attribute.Key(idem.AttrFence), "a replay owns nothing")
	rec, _, err = store.Get(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, run.SpanContext().TraceID().String(), rec.TraceID, "a replay does not touch the record")

	_, err = idem.Run(t.Context(), e, traceKey, traceScope, func(context.Context) (charge, error) {
		return charge{}, fmt.Errorf("provider refused %s", tracePayload)
	}, &idem.RunOpts{Operation: "charge-2"})
	require.Error(t, err)
	failed, _ := spanAttrs(t, spans.Ended(), idem.SpanRun)
	require.Equal(t, "Error", failed.Status().Code.String())

	requireNoSecrets(t, spans.Ended(), traceKey, traceScope, tracePayload, `"`+traceKey+`"`)
}

// TestK18MiddlewareDecisionSpans: the HTTP middleware's decisions are
// spans with the outcome (first, replay, key_reused), children of the
// request's span, and the record keeps the request's trace ID.
func TestK18MiddlewareDecisionSpans(t *testing.T) {
	t.Parallel()
	store, _ := newSQLiteStore(t)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	e, err := idem.New(store, idem.Config{Secret: idemtest.Secret, TracerProvider: tp})
	require.NoError(t, err)
	mw, err := idem.NewMiddleware(e, idem.MiddlewareConfig{})
	require.NoError(t, err)
	h := mw.Required(nil)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"card":"` + tracePayload + `"}`))
	}))
	send := func(body string) (int, string) {
		// The request's own span, as otelhttp would start it.
		ctx, span := tp.Tracer("test").Start(context.Background(), "POST /orders")
		defer span.End()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/orders", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", `"`+traceKey+`"`)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code, span.SpanContext().TraceID().String()
	}
	code, firstTrace := send(`{"payload":"` + tracePayload + `"}`)
	require.Equal(t, http.StatusCreated, code)
	decide, attrs := spanAttrs(t, spans.Ended(), idem.SpanDecide)
	require.Equal(t, "first", attrs[idem.AttrDecision].AsString())
	require.Equal(t, firstTrace, decide.SpanContext().TraceID().String(), "in the request's trace")
	admin, isAdmin := store.(idemdriver.Admin)
	require.True(t, isAdmin)
	rec, ok, err := admin.KeyByID(t.Context(), attrs[idem.AttrRecordID].AsInt64())
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, firstTrace, rec.TraceID)

	code, _ = send(`{"payload":"` + tracePayload + `"}`)
	require.Equal(t, http.StatusCreated, code)
	_, attrs = spanAttrs(t, spans.Ended(), idem.SpanDecide)
	require.Equal(t, "replay", attrs[idem.AttrDecision].AsString())

	code, _ = send(`{"payload":"other-` + tracePayload + `"}`)
	require.Equal(t, http.StatusUnprocessableEntity, code)
	_, attrs = spanAttrs(t, spans.Ended(), idem.SpanDecide)
	require.Equal(t, "key_reused", attrs[idem.AttrDecision].AsString())

	requireNoSecrets(t, spans.Ended(), traceKey, tracePayload)
}

// TestK18TracingOff: without a TracerProvider the engine records no
// span and stores no trace ID, even inside a traced request.
func TestK18TracingOff(t *testing.T) {
	t.Parallel()
	store, _ := newSQLiteStore(t)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	e, err := idem.New(store, idem.Config{Secret: idemtest.Secret})
	require.NoError(t, err)
	ctx, span := tp.Tracer("test").Start(t.Context(), "outer")
	_, err = idem.Run(ctx, e, traceKey, traceScope, func(context.Context) (int, error) { return 1, nil }, nil)
	require.NoError(t, err)
	span.End()
	require.Len(t, spans.Ended(), 1, "only the caller's span")
	rec, ok, err := store.Get(t.Context(), idemdriver.Ident{Scope: traceScope, Operation: idem.DefaultOperation,
		KeyDigest: idem.Digest(traceScope, idem.DefaultOperation, traceKey)})
	require.NoError(t, err)
	require.True(t, ok)
	require.Empty(t, rec.TraceID)
}
