package idemriver

import (
	"context"
	"errors"
	"fmt"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/unstuckhq/unstuck/idem"
)

// TracerName is the instrumentation scope of the middleware's spans.
const TracerName = "github.com/unstuckhq/unstuck/idem/idemriver"

// SpanWork ("idem.river.work") is the span around each keyed job's work
// with [Config].TracerProvider: its attributes are the job's ID, kind and
// attempt, the key's safe ID and operation (idem.AttrKeyID,
// idem.AttrOperation) and AttrJobOutcome — never the raw key or the job's
// args. An engine built with idem.Config.TracerProvider adds its own spans
// (idem.SpanRun, idem.SpanDecide) beneath it.
const SpanWork = "idem.river.work"

// Attribute keys of SpanWork.
const (
	AttrJobID      = "river.job.id"
	AttrJobKind    = "river.job.kind"
	AttrJobAttempt = "river.job.attempt"
	// AttrJobOutcome is what the middleware returned to River: done,
	// snoozed, cancelled or error.
	AttrJobOutcome = "idem.river.outcome"
)

// workTraced is work inside a SpanWork span.
func (m *Middleware) workTraced(ctx context.Context, job *rivertype.JobRow, key, scope string, doInner func(context.Context) error) error {
	op := Operation(job.Kind)
	ctx, span := m.tracer.Start(ctx, SpanWork, trace.WithAttributes(
		attribute.Int64(AttrJobID, job.ID),
		attribute.String(AttrJobKind, job.Kind),
		attribute.Int(AttrJobAttempt, job.Attempt),
		attribute.String(idem.AttrKeyID, idem.SafeKeyID(idem.Digest(scope, op, key))),
		attribute.String(idem.AttrOperation, op)))
	err := m.work(ctx, job, key, scope, doInner)
	var (
		snooze *river.JobSnoozeError
		cancel *river.JobCancelError
	)
	outcome := "done"
	switch {
	case err == nil:
	case errors.As(err, &snooze):
		outcome = "snoozed"
	case errors.As(err, &cancel):
		outcome = "cancelled"
	default:
		outcome = "error"
	}
	span.SetAttributes(attribute.String(AttrJobOutcome, outcome))
	if err != nil && outcome != "snoozed" {
		// The error's type only: its text may be the worker's own, which
		// may quote the job's args.
		span.SetAttributes(attribute.String("error.type", fmt.Sprintf("%T", err)))
		span.SetStatus(codes.Error, "")
	}
	span.End()
	return err
}
