package idemriver

import (
	"context"
	"errors"
	"testing"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/unstuckhq/unstuck/idem"
)

// TestK18JobSpans: with a TracerProvider on the
// middleware and the engine, a keyed job's work is an idem.river.work
// span with the job's ID, kind, attempt and outcome, over the engine's
// idem.run and idem.decide; a duplicate is a replay that snoozes nothing
// and completes; no span carries the raw key or the job's args.
func TestK18JobSpans(t *testing.T) {
	t.Parallel()
	const key, args = "job-key-Zq81-never-exported", `{"email":"bob+17@example.com","payload":"secret-args"}`
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	engine, err := idem.New(newStore(t), idem.Config{DisableSealing: true, TracerProvider: tp})
	require.NoError(t, err)
	mw, err := New(engine, Config{TracerProvider: tp})
	require.NoError(t, err)
	opts, err := InsertOpts(nil, key, "tenant-1")
	require.NoError(t, err)
	job := func(id int64) *rivertype.JobRow {
		return &rivertype.JobRow{ID: id, Kind: "send_welcome", Attempt: 1, Metadata: opts.Metadata, EncodedArgs: []byte(args)}
	}
	byName := func(name string) (sdktrace.ReadOnlySpan, map[attribute.Key]attribute.Value) {
		t.Helper()
		ended := spans.Ended()
		for i := len(ended) - 1; i >= 0; i-- {
			if ended[i].Name() == name {
				m := map[attribute.Key]attribute.Value{}
				for _, kv := range ended[i].Attributes() {
					m[kv.Key] = kv.Value
				}
				return ended[i], m
			}
		}
		t.Fatalf("no span %s", name)
		return nil, nil
	}

	require.NoError(t, mw.Work(t.Context(), job(41), func(context.Context) error { return nil }))
	work, attrs := byName(SpanWork)
	require.Equal(t, int64(41), attrs[AttrJobID].AsInt64())
	require.Equal(t, "send_welcome", attrs[AttrJobKind].AsString())
	require.Equal(t, int64(1), attrs[AttrJobAttempt].AsInt64())
	require.Equal(t, "done", attrs[AttrJobOutcome].AsString())
	require.Equal(t, Operation("send_welcome"), attrs[idem.AttrOperation].AsString())
	decide, attrs := byName(idem.SpanDecide)
	require.Equal(t, "first", attrs[idem.AttrDecision].AsString())
	require.Equal(t, work.SpanContext().TraceID(), decide.SpanContext().TraceID(), "the engine's spans are beneath the job's")

	require.NoError(t, mw.Work(t.Context(), job(42), func(context.Context) error { t.Fatal("ran twice"); return nil }))
	_, attrs = byName(idem.SpanDecide)
	require.Equal(t, "replay", attrs[idem.AttrDecision].AsString())

	// A failing worker: the span says error, with the error's type only.
	opts2, err := InsertOpts(nil, key+"-2", "tenant-1")
	require.NoError(t, err)
	err = mw.Work(t.Context(), &rivertype.JobRow{ID: 43, Kind: "send_welcome", Attempt: 2, Metadata: opts2.Metadata, EncodedArgs: []byte(args)},
		func(context.Context) error { return errors.New("mailer refused " + args) })
	require.Error(t, err)
	failed, attrs := byName(SpanWork)
	require.Equal(t, "error", attrs[AttrJobOutcome].AsString())
	require.Equal(t, "Error", failed.Status().Code.String())

	for _, s := range spans.Ended() {
		texts := []string{s.Name(), s.Status().Description}
		for _, kv := range s.Attributes() {
			texts = append(texts, kv.Value.String())
		}
		for _, ev := range s.Events() {
			texts = append(texts, ev.Name)
			for _, kv := range ev.Attributes {
				texts = append(texts, kv.Value.String())
			}
		}
		for _, text := range texts {
			for _, secret := range []string{key, "secret-args", "bob+17@example.com", "tenant-1"} {
				require.NotContains(t, text, secret, "span %s", s.Name())
			}
		}
	}
}
