package saga

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// TracerName is the instrumentation scope of the runner's spans.
const TracerName = "github.com/unstuckhq/unstuck/saga"

// Span names of a runner with [Config.TracerProvider], one around each call
// of a step's function by a worker:
//
//   - SpanStep ("saga.step"): Step.Do;
//   - SpanCompensate ("saga.compensate"): Step.Compensate;
//   - SpanVerify ("saga.verify"): Step.Verify.
//
// Their attributes (AttrOperationID, AttrType, AttrStep, AttrAttempt,
// AttrJobID) are safe to export: never the operation's input, a step's
// result, its idempotency key or an error's text (only its type).
const (
	SpanStep       = "saga.step"
	SpanCompensate = "saga.compensate"
	SpanVerify     = "saga.verify"
)

// Attribute keys of the runner's spans.
const (
	AttrOperationID = "saga.operation_id" // the operation's ID (the console's /operations/{id})
	AttrType        = "saga.type"         // the Definition's type
	AttrStep        = "saga.step"         // the step's name
	AttrAttempt     = "saga.attempt"      // the step's (or compensation's) attempt
	AttrJobID       = "river.job.id"      // the River job running the call
)

// startCall starts the span name around a step's call, or returns a nil
// span when tracing is off (nothing else runs then).
func (r *Runner[TTx]) startCall(ctx context.Context, name string, op sagadriver.Operation, step string, attempt int, jobID int64) (context.Context, trace.Span) {
	if r.tracer == nil {
		return ctx, nil
	}
	return r.tracer.Start(ctx, name, trace.WithAttributes(
		attribute.String(AttrOperationID, op.ID),
		attribute.String(AttrType, op.Type),
		attribute.String(AttrStep, step),
		attribute.Int(AttrAttempt, attempt),
		attribute.Int64(AttrJobID, jobID)))
}

// endCall ends span (nil: tracing off), failed when err is not nil, with
// the error's type only: its text may quote the step's input.
func endCall(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetAttributes(attribute.String("error.type", fmt.Sprintf("%T", err)))
		span.SetStatus(codes.Error, "")
	}
	span.End()
}
