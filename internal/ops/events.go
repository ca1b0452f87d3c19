package ops

import (
	"context"
	"errors"
	"strconv"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/unstuckhq/unstuck/decision"
	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// EventInserter inserts a decision's event job in the decision's
// transaction: an insert-only River client on the application's River
// tables (*river.Client[TTx]), the one the saga runner inserts with.
type EventInserter[TTx any] interface {
	InsertTx(ctx context.Context, tx TTx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// eventMarker is what the After of a decision's audit entry carries when
// the decision emitted an event: the next event on the same target finds
// its Previous by it (audit.Trail.LastMarkedPgxTx).
const eventMarker = `"decision_event":true`

// EventID is the ID of the event of the decision audited as entry seq.
func EventID(seq int64) string { return "dec_" + strconv.FormatInt(seq, 10) }

// EmitEvents makes every decision applied on d from now on emit a
// decision event (package decision) in its transaction, after its audit
// entry: a job of kind decision.Kind inserted with ins on queue (""
// decision.DefaultQueue). A decision that rolls back emits nothing. Call
// it before decisions are served; MySQL (no River) is refused.
func (d *DB[TTx]) EmitEvents(ins EventInserter[TTx], queue string) error {
	if ins == nil {
		return errors.New("ops: decision events need a River client")
	}
	if d.trail.Dialect() == audit.DialectMySQL {
		return errors.New("ops: decision events need River, which has no MySQL driver")
	}
	if queue == "" {
		queue = decision.DefaultQueue
	}
	d.events, d.eventQueue = ins, queue
	return nil
}

// appendDecision appends e, an applied decision's entry, in tx, and with
// events on inserts its event of type typ on subj in tx: its ID from the
// entry's seq, its Previous the newest earlier entry on the same target
// that emitted one. ev brings the type, subject and outcome; the rest is
// the entry's.
func (d *DB[TTx]) appendDecision(ctx context.Context, tx TTx, e audit.Entry, ev decision.Event) (audit.Entry, error) {
	if d.events == nil {
		return d.appendTx(ctx, tx, e)
	}
	e.After = withMarker(e.After)
	out, err := d.appendTx(ctx, tx, e)
	if err != nil {
		return out, err
	}
	prev, ok, err := d.tx.lastMarkedTx(ctx, tx, out.TargetKind, out.TargetID, eventMarker, out.Seq)
	if err != nil {
		return out, err
	}
	ev.ID, ev.Actor, ev.Reason, ev.RequestID, ev.Time = EventID(out.Seq), out.Actor, out.Reason, out.RequestID, out.At
	if ok {
		ev.Previous, ev.PreviousTime = EventID(prev.Seq), prev.At
	}
	_, err = d.events.InsertTx(ctx, tx, decision.JobArgs{Event: ev}, &river.InsertOpts{Queue: d.eventQueue})
	return out, err
}

// withMarker is after, a JSON object or nothing, with eventMarker added.
func withMarker(after []byte) []byte {
	n := len(after)
	switch {
	case n < 2 || after[n-1] != '}':
		return []byte("{" + eventMarker + "}")
	case n == 2:
		return []byte("{" + eventMarker + "}")
	}
	out := make([]byte, 0, n+len(eventMarker)+1)
	out = append(out, after[:n-1]...)
	out = append(out, ',')
	out = append(out, eventMarker...)
	return append(out, '}')
}

// keyEvent is the event of d on rec: its type, subject and outcome.
func keyEvent(d KeyDecision, target string, rec idemdriver.Record) decision.Event {
	ev := decision.Event{Type: decision.KeyConfirmed}
	switch d.Action {
	case idem.OperatorForget:
		ev.Type = decision.KeyForgotten
	case idem.OperatorConfirmHappened:
		ev.Outcome = decision.Happened
	case idem.OperatorConfirmNotHappened:
		ev.Outcome = decision.NotHappened
	}
	if d.Verification != nil {
		ev.Type = decision.KeyVerified
	}
	ref := d.ExternalRef
	if ref == "" {
		ref = rec.ExternalRef
	}
	ev.Subject = decision.Subject{Kind: decision.SubjectKey, ID: target, Scope: rec.Scope, Operation: rec.Operation,
		CorrelationID: rec.CorrelationID, ExternalRef: ref}
	return ev
}

// operationEventTypes are the event types of the operation actions.
var operationEventTypes = map[OperationAction]string{
	OperationRetry:      decision.OperationRetried,
	OperationConfirm:    decision.OperationConfirmed,
	OperationCompensate: decision.OperationCompensated,
	OperationResolve:    decision.OperationResolved,
	OperationRedrive:    decision.OperationRedriven,
}

// operationEvent is the event of d on op: its type, subject and outcome.
func operationEvent(d OperationDecision, op sagadriver.Operation) decision.Event {
	ev := decision.Event{Type: operationEventTypes[d.Action], Subject: decision.Subject{Kind: decision.SubjectOperation, ID: d.ID,
		Operation: op.Type, CorrelationID: op.CorrelationID, ExternalRef: d.ExternalID}}
	switch d.Action {
	case OperationConfirm:
		ev.Outcome = decision.NotHappened
		if d.Happened {
			ev.Outcome = decision.Happened
		}
	case OperationResolve:
		ev.Outcome = string(d.ResolveTo)
	case OperationRedrive:
		ev.Outcome = string(d.Mode)
	}
	return ev
}
