package saga_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/unstucktest/fakeworkspace"
)

// TestK18StepAndCompensationSpans: with
// Config.TracerProvider, each step's Do is a saga.step span and each
// compensation a saga.compensate span, with the operation's ID and type,
// the step and the attempt; no span carries the operation's input.
func TestK18StepAndCompensationSpans(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	b := backends[1].setup(t, func(c *saga.Config) { c.TracerProvider = tp }) // SQLite: the spans do not depend on the driver
	id := fmt.Sprintf("k18-%d", time.Now().UnixNano())
	const email = "bob+17@secret.example.com"
	b.provider.Inject(id+"/workspace", fakeworkspace.ActivateRefused)
	_, err := b.eng.Start(t.Context(), "signup", signupInput{Email: email}, &saga.StartOpts{ID: id})
	require.NoError(t, err)
	waitStatus(t, b, id, sagadriver.StatusCompensated)

	type call struct{ name, step string }
	var calls []call
	for _, s := range spans.Ended() {
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			attrs[kv.Key] = kv.Value
			require.NotContains(t, kv.Value.String(), email, "span %s: no input", s.Name())
		}
		require.NotContains(t, s.Status().Description, email)
		require.Empty(t, s.Events())
		if attrs[saga.AttrOperationID].AsString() != id {
			continue
		}
		require.Equal(t, "signup", attrs[saga.AttrType].AsString())
		require.Positive(t, attrs[saga.AttrAttempt].AsInt64(), "%s %s", s.Name(), attrs[saga.AttrStep].AsString())
		require.Positive(t, attrs[saga.AttrJobID].AsInt64())
		calls = append(calls, call{s.Name(), attrs[saga.AttrStep].AsString()})
		if s.Name() == saga.SpanStep && attrs[saga.AttrStep].AsString() == "workspace" {
			require.Equal(t, "Error", s.Status().Code.String(), "the refused activation")
		}
	}
	require.Equal(t, []call{
		{saga.SpanStep, "account"},
		{saga.SpanStep, "workspace"},
		{saga.SpanCompensate, "workspace"},
		{saga.SpanCompensate, "account"},
	}, calls)
}
