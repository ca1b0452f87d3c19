package idem

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/internal/decide"
)

// TracerName is the instrumentation scope of the engine's spans.
const TracerName = "github.com/unstuckhq/unstuck/idem"

// Span names of an engine with [Config].TracerProvider:
//
//   - SpanRun ("idem.run") around each [Run];
//   - SpanDecide ("idem.decide") around each decision on a key: the
//     reservation, the read of an existing record and any takeover, by
//     Run and by the HTTP middleware (one for each try while the
//     middleware waits for an in-flight duplicate).
//
// Their attributes are safe to export: the key's safe ID ([SafeKeyID]),
// the record's ID, the operation (route or job name), the decision, the
// fence and the attempt — never the raw key, the scope (the caller's
// identity), the request, or the result.
const (
	SpanRun    = "idem.run"
	SpanDecide = "idem.decide"
)

// Attribute keys of the engine's spans.
const (
	AttrKeyID     = "idem.key_id"    // SafeKeyID of the key
	AttrRecordID  = "idem.record_id" // the store's record ID (the console's /keys/{id})
	AttrOperation = "idem.operation" // the operation: route, job kind or RunOpts.Operation
	AttrDecision  = "idem.decision"  // first, replay, in_progress, pending_review, key_reused, takeover, restart, unavailable
	AttrStatus    = "idem.status"    // the record's status after the decision
	AttrFence     = "idem.fence"     // the owner's fence
	AttrAttempt   = "idem.attempt"   // the owner's attempt (1 on the first run)
	AttrReplayed  = "idem.replayed"  // on SpanRun: the value came from the store
)

// decisionName names the outcome of a decision for spans and logs.
func decisionName(a decide.Action) string {
	switch a {
	case decide.ActionReserve:
		return "first"
	case decide.ActionReplay:
		return "replay"
	case decide.ActionWait:
		return "in_progress"
	case decide.ActionAwaitReview:
		return "pending_review"
	case decide.ActionRejectReused:
		return "key_reused"
	case decide.ActionTakeOver:
		return "takeover"
	case decide.ActionRestart:
		return "restart"
	case decide.ActionUnavailable:
		return "unavailable"
	}
	return a.String()
}

// traceIDOf returns the trace ID of ctx's span, "" when there is none.
func traceIDOf(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		return sc.TraceID().String()
	}
	return ""
}

// endSpan ends span, marking it failed when err is not nil, with the
// error's type only: its text may be the callback's own, which may quote
// the payload.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetAttributes(attribute.String("error.type", fmt.Sprintf("%T", err)))
		span.SetStatus(codes.Error, "")
	}
	span.End()
}

// acquireTraced is acquire inside a SpanDecide span, storing the span's
// trace ID on the record it creates or takes over.
func (e *Engine) acquireTraced(ctx context.Context, s idemdriver.Store, id idemdriver.Ident, req decide.Request, ttl, lease time.Duration, rcv Recovery, inTx bool) (claim, error) {
	ctx, span := e.tracer.Start(ctx, SpanDecide, trace.WithAttributes(
		attribute.String(AttrKeyID, SafeKeyID(id.KeyDigest)),
		attribute.String(AttrOperation, id.Operation)))
	c, err := e.acquireAs(ctx, s, id, req, ttl, lease, rcv, inTx, traceIDOf(ctx))
	if err == nil {
		span.SetAttributes(attribute.String(AttrDecision, decisionName(c.outcome.Action)), attribute.String(AttrStatus, string(c.rec.Status)))
		if c.rec.ID != 0 {
			span.SetAttributes(attribute.Int64(AttrRecordID, c.rec.ID))
		}
		if c.owned() {
			span.SetAttributes(attribute.Int64(AttrFence, c.rec.Fence), attribute.Int(AttrAttempt, c.rec.Attempts))
		}
	}
	endSpan(span, err)
	return c, err
}

// runTraced is runKey inside a SpanRun span.
func runTraced[T any](ctx context.Context, e *Engine, id idemdriver.Ident, req decide.Request, cfg runConfig, recovery Recovery, fn func(ctx context.Context) (T, error)) (Result[T], error) {
	ctx, span := e.tracer.Start(ctx, SpanRun, trace.WithAttributes(
		attribute.String(AttrKeyID, SafeKeyID(id.KeyDigest)),
		attribute.String(AttrOperation, id.Operation)))
	res, err := runKey(ctx, e, id, req, cfg, recovery, fn)
	span.SetAttributes(attribute.Bool(AttrReplayed, res.Replayed))
	endSpan(span, err)
	return res, err
}
